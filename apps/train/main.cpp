// lstrain: trains a Transformer translation model. Options: --help.
#include "core/cli/app_main.h"
#include "train_app.h"

int main(int argc, char** argv) { return lseq::app_main(lseq::App::train, argc, argv, lseq::run_train); }
