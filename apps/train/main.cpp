// lstrain: trains a Transformer translation model. Options: --help.
#include "core/app_entry.h"
#include "core/app_main.h"

int main(int argc, char** argv) { return lseq::app_main(lseq::App::train, argc, argv, lseq::run_train); }
