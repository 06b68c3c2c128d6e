// flashmsa — command-line entry point. Everything lives in cli_app.h / flashmsa_tools.
#include <iostream>

#include "cli_app.h"

int main(int argc, char** argv) { return flashmsa::tools::cli_main(argc, argv, std::cout, std::cerr); }
