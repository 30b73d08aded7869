/* llama.h's two per-token vocab calls, bound for CPython: `llgbridge._llamacall`.
 *
 * Why not ctypes: a whole-vocab pass (the census, a bridge's token table) makes two calls per
 * token, 3.8 million over the fixtures. Through ctypes each call costs about 0.2 us of argument
 * marshalling (a libffi call interface prepared on every call, a conversion per argument), eight
 * times what llama.cpp spends in it; bound here, a call costs about a fifth of that. The
 * functions take llama.h's arguments in llama.h's order and return what llama.cpp returns; the
 * loops, buffers and comparisons stay in Python (vocab.py). Built by `make setup`
 * (python -m llgbridge.cbuild) against the libllama that llama-cpp-python installed.
 *
 * Two checks that llama.cpp does not make, because a C++ exception thrown through a C caller
 * aborts the process: a token outside the vocab raises IndexError (llama.cpp's
 * `id_to_token.at()` would throw), and a length larger than the buffer raises ValueError.
 * The GIL is kept: each call takes well under a microsecond.
 *
 * The census's whole-vocab comparison is one call here too (`piece_detok_differences`): in Python its
 * loop cost ten times the C loop it is measured against (0.73 s against 0.07 s over the fixtures),
 * most of it the per-token call and comparison in the interpreter; it makes the same three calls per
 * token in the same order and answers as vocab.py's loop did (a test holds it to llama-cpp-python's
 * own ctypes bindings).
 *
 * And one walk that is not a llama.h call but runs before every one of them: `scan_strings`, a
 * GGUF string array walked, with the token list's two checks (a repeated token, a NUL byte: the
 * loader aborts the process on either). In Python it was most of the time `Vocab` spends before
 * llama.cpp's own load (0.67 s over the fixtures, against 0.07 s for the census's C loop); the
 * answer is the same (gguf_meta.py keeps the Python walk for a file it overruns, to name where).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "llama.h"

static int vocab_arg(PyObject *o, const struct llama_vocab **out) {
    void *p = PyLong_AsVoidPtr(o);
    if (p == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "vocab: a NULL pointer");
        return -1;
    }
    *out = (const struct llama_vocab *)p;
    return 0;
}

static int int_arg(PyObject *o, const char *what, long *out) {
    long v = PyLong_AsLong(o);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (v < INT32_MIN || v > INT32_MAX) {
        PyErr_Format(PyExc_OverflowError, "%s: %ld does not fit in int32_t", what, v);
        return -1;
    }
    *out = v;
    return 0;
}

/* `text`, a bytearray, and `length`, at most its size */
static int text_arg(PyObject *text, PyObject *length, char **buf, long *len) {
    if (!PyByteArray_Check(text)) {
        PyErr_Format(PyExc_TypeError, "buf: a bytearray, not %.100s", Py_TYPE(text)->tp_name);
        return -1;
    }
    if (int_arg(length, "length", len) < 0) return -1;
    if (*len < 0 || *len > PyByteArray_GET_SIZE(text)) {
        PyErr_Format(PyExc_ValueError, "length %ld: outside the buffer's %zd bytes", *len, PyByteArray_GET_SIZE(text));
        return -1;
    }
    *buf = PyByteArray_AS_STRING(text);
    return 0;
}

static int token_in_vocab(const struct llama_vocab *vocab, long token) {
    int32_t n = llama_vocab_n_tokens(vocab);
    if (token < 0 || token >= n) {
        PyErr_Format(PyExc_IndexError, "token %ld: outside the vocab's %d tokens", token, n);
        return -1;
    }
    return 0;
}

static int nargs_are(Py_ssize_t nargs, Py_ssize_t want, const char *name) {
    if (nargs != want) {
        PyErr_Format(PyExc_TypeError, "%s takes %zd arguments (%zd given)", name, want, nargs);
        return -1;
    }
    return 0;
}

/* what both calls take first: the argument count, the vocab (args[0]), and a text buffer with its
   length (args[text_at], args[text_at + 1]) */
static int common_args(PyObject *const *args, Py_ssize_t nargs, Py_ssize_t want, const char *name, int text_at,
                       const struct llama_vocab **vocab, char **buf, long *len) {
    if (nargs_are(nargs, want, name) < 0 || vocab_arg(args[0], vocab) < 0) return -1;
    return text_arg(args[text_at], args[text_at + 1], buf, len);
}

static PyObject *token_to_piece(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    const struct llama_vocab *vocab;
    char *buf;
    long len, token, lstrip;
    int special;
    if (common_args(args, nargs, 6, "token_to_piece", 2, &vocab, &buf, &len) < 0 || int_arg(args[1], "token", &token) < 0 ||
        int_arg(args[4], "lstrip", &lstrip) < 0 || (special = PyObject_IsTrue(args[5])) < 0 || token_in_vocab(vocab, token) < 0)
        return NULL;
    return PyLong_FromLong(llama_token_to_piece(vocab, (llama_token)token, buf, (int32_t)len, (int32_t)lstrip, special));
}

static PyObject *detokenize(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    const struct llama_vocab *vocab;
    char *buf;
    long len, n_tokens;
    int remove_special, unparse_special;
    if (common_args(args, nargs, 7, "detokenize", 3, &vocab, &buf, &len) < 0 || int_arg(args[2], "n_tokens", &n_tokens) < 0 ||
        (remove_special = PyObject_IsTrue(args[5])) < 0 || (unparse_special = PyObject_IsTrue(args[6])) < 0)
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[1], &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return NULL;
    PyObject *result = NULL;
    const char *fmt = view.format ? view.format : "B";
    size_t fl = strlen(fmt);
    if (view.itemsize != (Py_ssize_t)sizeof(llama_token) || fl == 0 || (fmt[fl - 1] != 'i' && fmt[fl - 1] != 'l')) {
        PyErr_Format(PyExc_TypeError, "tokens: a buffer of int32, not of '%s' items of %zd bytes", fmt, view.itemsize);
    } else if (n_tokens < 0 || n_tokens > view.len / view.itemsize) {
        PyErr_Format(PyExc_ValueError, "n_tokens %ld: outside the buffer's %zd tokens", n_tokens, view.len / view.itemsize);
    } else {
        const llama_token *tokens = (const llama_token *)view.buf;
        long i;
        for (i = 0; i < n_tokens; i++)
            if (token_in_vocab(vocab, tokens[i]) < 0) break;
        if (i == n_tokens)
            result = PyLong_FromLong(llama_detokenize(vocab, tokens, (int32_t)n_tokens, buf, (int32_t)len, remove_special,
                                                      unparse_special));
    }
    PyBuffer_Release(&view);
    return result;
}

/* one (token, piece, detok, lstripped) tuple */
static int add_difference(PyObject *out, long t, const char *piece, int n, const char *detok, int m,
                          const char *lstripped, int k) {
    PyObject *row = Py_BuildValue("(ly#y#y#)", t, piece, (Py_ssize_t)n, detok, (Py_ssize_t)m, lstripped, (Py_ssize_t)k);
    if (row == NULL) return -1;
    int err = PyList_Append(out, row);
    Py_DECREF(row);
    return err;
}

/* the census's pass: (differences, None), or (the differences before it, (token, which call, bytes
   it needs)) where a call needs more than `len` bytes (`which`: 0 the piece, 1 the detokenized
   text, 2 the piece with its leading space stripped) */
static PyObject *piece_detok_differences(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    const struct llama_vocab *vocab;
    long len;
    if (nargs_are(nargs, 2, "piece_detok_differences") < 0 || vocab_arg(args[0], &vocab) < 0 ||
        int_arg(args[1], "length", &len) < 0)
        return NULL;
    if (len <= 0) {
        PyErr_Format(PyExc_ValueError, "length %ld: must be positive", len);
        return NULL;
    }
    char *piece = PyMem_Malloc(len), *detok = PyMem_Malloc(len), *lstripped = PyMem_Malloc(len);
    PyObject *out = PyList_New(0), *failure = NULL;
    int32_t n_tokens = llama_vocab_n_tokens(vocab);
    int ok = piece && detok && lstripped && out;
    for (llama_token t = 0; ok && failure == NULL && t < n_tokens; t++) {
        int32_t n = llama_token_to_piece(vocab, t, piece, (int32_t)len, 0, false);
        int32_t m = llama_detokenize(vocab, &t, 1, detok, (int32_t)len, false, false);
        if (n == m && n >= 0 && memcmp(piece, detok, (size_t)n) == 0) continue;
        int32_t k = n < 0 || m < 0 ? 0 : llama_token_to_piece(vocab, t, lstripped, (int32_t)len, 1, false);
        if (n < 0 || m < 0 || k < 0) /* the first call that ran out of room, as vocab.py named it */
            failure = Py_BuildValue("(lii)", (long)t, n < 0 ? 0 : m < 0 ? 1 : 2, -(n < 0 ? n : m < 0 ? m : k));
        else
            ok = add_difference(out, t, piece, n, detok, m, lstripped, k) == 0;
    }
    PyMem_Free(piece);
    PyMem_Free(detok);
    PyMem_Free(lstripped);
    if (!ok || (failure == NULL && PyErr_Occurred())) {
        Py_XDECREF(out);
        Py_XDECREF(failure);
        return PyErr_Occurred() ? NULL : PyErr_NoMemory();
    }
    PyObject *result = Py_BuildValue("(OO)", out, failure ? failure : Py_None);
    Py_DECREF(out);
    Py_XDECREF(failure);
    return result;
}

PyDoc_STRVAR(piece_detok_differences_doc,
"piece_detok_differences(vocab, length) -> (differences, failure)\n\n"
"Every token t whose llama_token_to_piece(vocab, t, .., 0, false) differs from\n"
"llama_detokenize(vocab, [t], 1, .., false, false), in order, as (t, piece, detok, lstripped), lstripped\n"
"being llama_token_to_piece(.., 1, false); `length` the buffers' size. failure: None, or (token,\n"
"which call: 0 piece, 1 detokenize, 2 lstripped, the bytes it needs) where the pass stopped.");

/* FNV-1a: every token's bytes into the table's slot, compared byte for byte on a collision */
static uint64_t fnv1a(const unsigned char *p, uint64_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (uint64_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

typedef struct {
    const unsigned char *buf;
    Py_ssize_t len;
    const unsigned char **start; /* each string's bytes (checks only) */
    uint64_t *size;
} strings;

/* the end offset of `n` strings from `pos`, each a u64 length then its bytes (the starts kept when
   asked), or -1 when one runs past the end */
static long long walk(strings *s, long long pos, uint64_t n) {
    for (uint64_t j = 0; j < n; j++) {
        if (pos < 0 || s->len - pos < 8) return -1;
        uint64_t k;
        memcpy(&k, s->buf + pos, 8); /* GGUF is little-endian, as every machine this builds on */
        pos += 8;
        if (k > (uint64_t)(s->len - pos)) return -1;
        if (s->start) {
            s->start[j] = s->buf + pos;
            s->size[j] = k;
        }
        pos += (long long)k;
    }
    return pos;
}

/* (first j repeating an earlier string, that string's index) into dup, or -1s */
static int first_repeat(const strings *s, uint64_t n, long long dup[2]) {
    uint64_t cap = 1;
    while (cap < 2 * n) cap <<= 1;
    int64_t *slot = PyMem_Malloc(cap * sizeof(int64_t));
    if (slot == NULL) return -1;
    for (uint64_t i = 0; i < cap; i++) slot[i] = -1;
    dup[0] = dup[1] = -1;
    for (uint64_t j = 0; j < n && dup[0] < 0; j++) {
        uint64_t i = fnv1a(s->start[j], s->size[j]) & (cap - 1);
        for (; slot[i] >= 0; i = (i + 1) & (cap - 1)) {
            int64_t e = slot[i];
            if (s->size[e] == s->size[j] && memcmp(s->start[e], s->start[j], s->size[j]) == 0) {
                dup[0] = (long long)j;
                dup[1] = e;
                break;
            }
        }
        if (dup[0] < 0) slot[i] = (int64_t)j;
    }
    PyMem_Free(slot);
    return 0;
}

static long long first_nul(const strings *s, uint64_t n) {
    for (uint64_t j = 0; j < n; j++)
        if (memchr(s->start[j], 0, s->size[j]) != NULL) return (long long)j;
    return -1;
}

/* the checks need every string's place: walked once to find that all `n` are there (each takes at
   least 8 bytes of the buffer, so a count the file cannot hold fails fast), then again to keep them */
static PyObject *scan_checked(strings *s, long long pos, uint64_t n) {
    long long dup[2] = {-1, -1}, nul = -1, end = walk(s, pos, n);
    if (end >= 0) {
        s->start = PyMem_Malloc((n ? n : 1) * sizeof(*s->start));
        s->size = PyMem_Malloc((n ? n : 1) * sizeof(*s->size));
        if (s->start == NULL || s->size == NULL) {
            PyMem_Free(s->start);
            PyMem_Free(s->size);
            return PyErr_NoMemory();
        }
        end = walk(s, pos, n);
        if (end >= 0) {
            if (first_repeat(s, n, dup) < 0) end = -2;
            nul = first_nul(s, n);
        }
        PyMem_Free(s->start);
        PyMem_Free(s->size);
    }
    if (end == -2) return PyErr_NoMemory();
    return Py_BuildValue("(LLLL)", end, dup[0], dup[1], nul);
}

static PyObject *scan_strings(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs_are(nargs, 4, "scan_strings") < 0) return NULL;
    long long pos = PyLong_AsLongLong(args[1]);
    unsigned long long n = PyLong_AsUnsignedLongLong(args[2]);
    int checks = PyObject_IsTrue(args[3]);
    if (PyErr_Occurred() || checks < 0) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    strings s = {(const unsigned char *)view.buf, view.len, NULL, NULL};
    PyObject *result;
    if (checks)
        result = scan_checked(&s, pos, n);
    else
        result = Py_BuildValue("(LLLL)", walk(&s, pos, n), -1LL, -1LL, -1LL);
    PyBuffer_Release(&view);
    return result;
}

PyDoc_STRVAR(scan_strings_doc,
"scan_strings(buf, pos, n, checks) -> (end, repeated, first, nul)\n\n"
"The `n` GGUF strings of `buf` (any buffer: an mmap) from offset `pos`: the offset after them, or -1\n"
"when one runs past the end. With `checks`, the first string repeating an earlier one and that one's\n"
"index, and the first string holding a NUL byte; -1 where there is none.");

PyDoc_STRVAR(token_to_piece_doc,
"token_to_piece(vocab, token, buf, length, lstrip, special) -> int\n\n"
"llama_token_to_piece(vocab, token, buf, length, lstrip, special): `vocab` the pointer as an int,\n"
"`buf` a bytearray of at least `length` bytes. Returns the piece's length, or minus the length it needs.");

PyDoc_STRVAR(detokenize_doc,
"detokenize(vocab, tokens, n_tokens, text, text_len_max, remove_special, unparse_special) -> int\n\n"
"llama_detokenize(...): `tokens` a buffer of int32 (array('i')) holding at least `n_tokens`,\n"
"`text` a bytearray of at least `text_len_max` bytes. Returns the text's length, or minus the length it needs.");

static PyMethodDef methods[] = {
    {"token_to_piece", (PyCFunction)(void (*)(void))token_to_piece, METH_FASTCALL, token_to_piece_doc},
    {"detokenize", (PyCFunction)(void (*)(void))detokenize, METH_FASTCALL, detokenize_doc},
    {"scan_strings", (PyCFunction)(void (*)(void))scan_strings, METH_FASTCALL, scan_strings_doc},
    {"piece_detok_differences", (PyCFunction)(void (*)(void))piece_detok_differences, METH_FASTCALL,
     piece_detok_differences_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_llamacall",
    "llama.h's per-token vocab calls (llama_token_to_piece, llama_detokenize), bound for CPython, and the GGUF "
    "string walk before them (scan_strings).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__llamacall(void) { return PyModule_Create(&module); }
