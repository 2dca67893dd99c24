// lstranslate: translates lines of text with a trained model. Options: --help.
#include "core/cli/app_main.h"
#include "translate_app.h"

int main(int argc, char** argv) { return lseq::app_main(lseq::App::translate, argc, argv, lseq::run_translate); }
