#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "support/catch_session.hpp"

int specdec::testing::run_catch_session(int argc, char* argv[]) { return Catch::Session().run(argc, argv); }
