// llama.cpp's own JSON-schema converter, forced to GBNF: reads a schema on stdin and prints the
// grammar `json_schema_to_grammar(schema, /* force_gbnf = */ true)` makes of it, the one a build
// without llguidance would hand its GBNF sampler. The server matrix's control case sends it as a
// plain `grammar` (guide 3.1: that path takes neither bug).
#include "json-schema-to-grammar.h"

#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>

int main() {
    std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    try {
        std::fputs(json_schema_to_grammar(common_json::parse(text), true).c_str(), stdout);
    } catch (const std::exception & e) {
        std::fprintf(stderr, "schema-to-gbnf: %s\n", e.what());
        return 1;
    }
    return 0;
}
