# Builds llama-server, the product a user runs, from the vendored llama.cpp tree, against the
# venv's libllama/libggml/libmtmd (the same vendored commit), so only what the server adds is
# compiled: common/ (libllama-common), tools/server/ and vendor/cpp-httplib. Four binaries:
#
#   llama-server-SAMPLER-LLG   SAMPLER: upstream (the shipped common/llguidance.cpp), fixed
#                              (with patches/), or a candidate patch's name (patches/candidates/,
#                              on top of the PR); LLG: the llguidance the binary links, 1.0.1 (what
#                              llama.cpp pins: common/CMakeLists.txt) or the venv's (1.9.1)
#
# and schema-to-gbnf (native/schema_to_gbnf.cpp: llama.cpp's own schema converter, forced to GBNF).
#
# Only common/llguidance.cpp differs between the samplers, and only the linked library between
# the llguidance versions, so everything else is compiled once (about 5 minutes on 2 cores).
#
# Run through `python -m llgbridge.analyses.server.llama_server build` (what `make server` does), which runs make
# in the checkout, every path relative to it (as native/Makefile says why), and passes:
#   SHIPPED FIXED (the two trees), OUT, GEN (generated ui.h, ui.cpp, build-info.cpp),
#   LLAMA_DIR LLAMA_RPATH (the venv's llama_cpp/lib), LLG_VERSIONS and for each version V
#   LLG_DIR_V LLG_LIB_V LLG_RPATH_V, PY_DIR PY_RPATH PY_LIB (X_DIR and X_RPATH as in native/Makefile)
#
# CUDA needs nothing here: the venv's libggml is what carries the backend (make setup CUDA=1).

CXX ?= c++
SERVER_CXXFLAGS ?= -O2 -std=c++17 -pthread
HERE := $(dir $(lastword $(MAKEFILE_LIST)))

# what CMake defines for these targets: common/CMakeLists.txt (LLAMA_USE_LLGUIDANCE under
# LLAMA_LLGUIDANCE, LLAMA_SUBPROCESS on by default off Windows) and vendor/cpp-httplib
DEFS := -DLLAMA_USE_LLGUIDANCE -DLLAMA_SUBPROCESS
HTTPLIB_DEFS := -DCPPHTTPLIB_FORM_URL_ENCODED_PAYLOAD_MAX_LENGTH=1048576 -DCPPHTTPLIB_LISTEN_BACKLOG=512 \
                -DCPPHTTPLIB_REQUEST_URI_MAX_LENGTH=32768 -DCPPHTTPLIB_TCP_NODELAY=1
incs = -I$(1)/common -I$(1)/include -I$(1)/ggml/include -I$(1)/vendor -I$(1)/vendor/cpp-httplib \
       -I$(1)/tools/mtmd -I$(1)/tools/server -I$(1) -I$(GEN) -I$(HERE)

O := $(OUT)/obj
B := $(OUT)/bin

COMMON_SRC := $(filter-out %/llguidance.cpp,$(wildcard $(SHIPPED)/common/*.cpp)) \
              $(wildcard $(SHIPPED)/common/jinja/*.cpp) $(wildcard $(SHIPPED)/common/parsers/*.cpp)
SERVER_SRC := $(wildcard $(SHIPPED)/tools/server/*.cpp)
OBJS := $(patsubst $(SHIPPED)/%.cpp,$(O)/%.o,$(COMMON_SRC) $(SERVER_SRC)) \
        $(O)/vendor/cpp-httplib/httplib.o $(O)/gen/build-info.o $(O)/gen/ui.o

# the llguidance wheel's extension module exports the C API and expects libpython around it; it
# comes after the objects, or every llg_* symbol is undefined
LDLIBS = -L'$(LLAMA_DIR)' -lmtmd -lllama -lggml -lggml-base '-Wl,-rpath,$(LLAMA_RPATH)' \
         -L'$(LLG_DIR_$(1))' -l:$(LLG_LIB_$(1)) '-Wl,-rpath,$(LLG_RPATH_$(1))' \
         -L'$(PY_DIR)' -l$(PY_LIB) '-Wl,-rpath,$(PY_RPATH)' -lpthread -ldl

SAMPLER_NAMES := upstream fixed $(CANDIDATES)
BINS := $(foreach s,$(SAMPLER_NAMES),$(foreach v,$(LLG_VERSIONS),$(B)/llama-server-$(s)-$(v))) $(B)/schema-to-gbnf
COMMON_OBJS := $(patsubst $(SHIPPED)/%.cpp,$(O)/%.o,$(COMMON_SRC)) $(O)/vendor/cpp-httplib/httplib.o $(O)/gen/build-info.o

all: $(BINS)

$(O)/common/%.o: $(SHIPPED)/common/%.cpp
	@mkdir -p $(@D)
	$(CXX) $(SERVER_CXXFLAGS) $(DEFS) $(call incs,$(SHIPPED)) -c $< -o $@
$(O)/tools/server/%.o: $(SHIPPED)/tools/server/%.cpp
	@mkdir -p $(@D)
	$(CXX) $(SERVER_CXXFLAGS) $(DEFS) $(call incs,$(SHIPPED)) -c $< -o $@
$(O)/vendor/cpp-httplib/httplib.o: $(SHIPPED)/vendor/cpp-httplib/httplib.cpp
	@mkdir -p $(@D)
	$(CXX) $(SERVER_CXXFLAGS) $(HTTPLIB_DEFS) $(call incs,$(SHIPPED)) -c $< -o $@
$(O)/gen/%.o: $(GEN)/%.cpp
	@mkdir -p $(@D)
	$(CXX) $(SERVER_CXXFLAGS) $(call incs,$(SHIPPED)) -c $< -o $@
$(O)/llguidance-upstream.o: $(SHIPPED)/common/llguidance.cpp $(HERE)llguidance.h
	@mkdir -p $(@D)
	$(CXX) $(SERVER_CXXFLAGS) $(DEFS) $(call incs,$(SHIPPED)) -c $< -o $@
$(O)/llguidance-fixed.o: $(FIXED)/common/llguidance.cpp $(HERE)llguidance.h
	@mkdir -p $(@D)
	$(CXX) $(SERVER_CXXFLAGS) $(DEFS) $(call incs,$(FIXED)) -c $< -o $@

# a candidate patch's sampler (patches/candidates/, its tree SRC_<name>)
define candidate
$(O)/llguidance-$(1).o: $(SRC_$(1))/common/llguidance.cpp $(HERE)llguidance.h
	@mkdir -p $$(@D)
	$$(CXX) $$(SERVER_CXXFLAGS) $$(DEFS) $$(call incs,$(SRC_$(1))) -c $$< -o $$@
endef
$(foreach c,$(CANDIDATES),$(eval $(call candidate,$(c))))

define server_bin
$(B)/llama-server-$(1)-$(2): $(OBJS) $(O)/llguidance-$(1).o
	@mkdir -p $$(@D)
	$$(CXX) $$^ -o $$@ $$(call LDLIBS,$(2))
endef
$(foreach s,$(SAMPLER_NAMES),$(foreach v,$(LLG_VERSIONS),$(eval $(call server_bin,$(s),$(v)))))

# llama.cpp's json_schema_to_grammar forced to GBNF (native/schema_to_gbnf.cpp), for the control case
$(O)/schema_to_gbnf.o: $(HERE)schema_to_gbnf.cpp
	@mkdir -p $(@D)
	$(CXX) $(SERVER_CXXFLAGS) $(DEFS) $(call incs,$(SHIPPED)) -c $< -o $@
$(B)/schema-to-gbnf: $(O)/schema_to_gbnf.o $(COMMON_OBJS) $(O)/llguidance-upstream.o
	@mkdir -p $(@D)
	$(CXX) $^ -o $@ $(call LDLIBS,$(firstword $(LLG_VERSIONS)))

.PHONY: all
.DELETE_ON_ERROR:
.SECONDARY:
