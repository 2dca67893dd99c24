// placeholder until the options module lands
int main() { return 0; }
