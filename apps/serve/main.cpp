// lsserve: serves a model trained by lstrain over HTTP (docs/serving.md). Options: --help.
#include "core/cli/app_main.h"
#include "serve_app.h"

int main(int argc, char** argv) { return lseq::app_main(lseq::App::serve, argc, argv, lseq::run_serve); }
