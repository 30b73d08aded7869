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
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_llamacall",
    "llama.h's per-token vocab calls (llama_token_to_piece, llama_detokenize), bound for CPython.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__llamacall(void) { return PyModule_Create(&module); }
