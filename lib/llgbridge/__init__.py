"""llgbridge: the llama.cpp <-> llguidance bridge, ported to Python, and the analyses that audit it.

Modules, one concern each:
- `llg`: ctypes binding to llguidance's C API (from its wheel), and `Matcher`, an `LlgMatcher`;
- `vocab`: a llama.cpp vocab through llama-cpp-python (`token_to_piece`, `detokenize`, `tokenize`);
- `gguf_meta`: tokenizer facts from a GGUF file's key-values, by a fast walk;
- `bridges`: the bridge variants (`upstream`, `fixed`, `truth`) behind one interface, and
  `sentinel`: llguidance's own llama.cpp integration as one more;
- `probe`: the PR's three-probe verdict on `llama_tokenize` and the tokenizer state behind it;
- `grammars`: the grammars the analyses use, and the guide's two defaults;
- `census` (guide 4.2, 4.3), `masks` (leak and forced-mask tests, guide 4.4, 5.1, 7),
  `exactness` (tokenize exactness, guide 10 rows 2 and 4), `soundness` (masks along valid
  strings, guide 10 row 1), `generate` (end-to-end generation, guide 8), `synth` (random-weight
  models around a fixture's tokenizer): the analyses;
- `guide`: the review guide's own figures, for comparison only;
- `native`: llama.cpp's own C++ (shipped and patched), built and checked against the port;
- `fixtures`, `paths`, `errors`, `nb`, `run`, `report`, `whatif`: fetch fixtures, name files
  and errors, serve the notebooks, execute them, gather the report, run everything on one file;
- `gguf_fuzz` (mutated GGUF files through loading), `bench` (the census against the same
  loop in C): robustness and cost.
"""

__version__ = "0.1.0"
