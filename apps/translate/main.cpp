// lstranslate: translates text with a trained model. Options: --help.
#include "core/app_entry.h"
#include "core/app_main.h"

int main(int argc, char** argv) { return lseq::app_main(lseq::App::translate, argc, argv, lseq::run_translate); }
