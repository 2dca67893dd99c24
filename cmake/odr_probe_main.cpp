// lseq_odr_probe's entry point (cmake/LseqOdrProbe.cmake): the probe exists to be linked, not run.
int main() { return 0; }
