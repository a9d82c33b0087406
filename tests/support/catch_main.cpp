// Entry point of the tests.
#include "support/catch_session.hpp"

int main(int argc, char* argv[]) { return specdec::testing::run_catch_session(argc, argv); }
