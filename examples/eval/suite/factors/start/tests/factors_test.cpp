// The tests of factorize: none yet.
int main() { return 0; }
