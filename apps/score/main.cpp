// lsscore: scores sentence pairs with a trained model, or rescores an n-best list. Options: --help.
#include "core/cli/app_main.h"
#include "score_app.h"

int main(int argc, char** argv) { return lseq::app_main(lseq::App::score, argc, argv, lseq::run_score); }
