/* a2a-sdk's SSE framing split in the read, in C: the A2A hot read's first step.
 *
 * Why C: a2a-sdk writes every event as one "data: " line and CRLF, so a read is split at
 * the separators "\r\n\r\ndata: ".  In Python that is a bytes.split, a join of the pieces
 * and two `in` checks for line breaks per read: ~300 ns an event, a sixth of the whole
 * SSE bytes -> CAP events drive.  Here it is one pass: a line break may only occur inside
 * a separator (or in the CRLF CRLF that ends the read's last event), so memchr finds each
 * CR, the CR either starts a separator or the split gives up, and a memchr bounded by that
 * CR tells no LF came before it; each event's data is then one PyBytes_FromStringAndSize.
 * machine_sse.py holds the same split in Python (split_py): the reference this one is
 * tested against (tests/driver_a2a/test_sse_split.py) and the fallback when no C compiler
 * was there at install.
 *
 * split(held, chunk) -> (datas, keep) | None.  held: the start of an event the last read
 * left ("data: ..." without a line break, or b""); chunk: the read.  datas: the data of
 * every event the read completes, as a Payloads; keep: what to hold for the next read.
 * None: the read has fewer than one separator or a line break outside the separators (the
 * general line rules take it).
 *
 * Payloads is a sequence of bytes that keeps the read and where each event's data lies in
 * it: an event's bytes object is made only when it is asked for.  The byte-shape match
 * (bindings/_byte_shape.c) reads a run of text events in place through its `buffer`,
 * `spans` and `first`, so the ~95 % of events a turn's text is never become objects at
 * all; the others do, one by one, when the general rules take them.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <string.h>

static const char SEP[] = "\r\n\r\ndata: ";
#define SEP_LEN 10
#define PREFIX_LEN 6 /* "data: " */

typedef struct {
    PyObject_HEAD
    PyObject *buffer; /* the read */
    PyObject *first;  /* the first event's data when it began in an earlier read, or NULL */
    PyObject *spans;  /* bytes: a (start, end) pair of Py_ssize_t per event, into buffer */
    Py_ssize_t n;
} Payloads;

static void
Payloads_dealloc(Payloads *self)
{
    Py_XDECREF(self->buffer);
    Py_XDECREF(self->first);
    Py_XDECREF(self->spans);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static Py_ssize_t
Payloads_len(Payloads *self)
{
    return self->n;
}

static PyObject *
Payloads_item(Payloads *self, Py_ssize_t k)
{
    if (k < 0 || k >= self->n) {
        PyErr_SetString(PyExc_IndexError, "Payloads index out of range");
        return NULL;
    }
    if (k == 0 && self->first != NULL)
        return Py_NewRef(self->first);
    const Py_ssize_t *span = (const Py_ssize_t *)PyBytes_AS_STRING(self->spans) + 2 * k;
    return PyBytes_FromStringAndSize(PyBytes_AS_STRING(self->buffer) + span[0],
                                     span[1] - span[0]);
}

static PyObject *
Payloads_subscript(Payloads *self, PyObject *key)
{
    if (PyIndex_Check(key)) {
        Py_ssize_t k = PyNumber_AsSsize_t(key, PyExc_IndexError);
        if (k == -1 && PyErr_Occurred())
            return NULL;
        return Payloads_item(self, k < 0 ? k + self->n : k);
    }
    if (!PySlice_Check(key)) {
        PyErr_SetString(PyExc_TypeError, "Payloads indices are integers or slices");
        return NULL;
    }
    Py_ssize_t start, stop, step;
    if (PySlice_Unpack(key, &start, &stop, &step) < 0)
        return NULL;
    Py_ssize_t count = PySlice_AdjustIndices(self->n, &start, &stop, step);
    PyObject *out = PyList_New(count);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t j = 0, k = start; j < count; j++, k += step) {
        PyObject *item = Payloads_item(self, k);
        if (item == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, j, item);
    }
    return out;
}

static PyObject *
Payloads_first(Payloads *self, void *closure)
{
    (void)closure;
    return Py_NewRef(self->first != NULL ? self->first : Py_None);
}

static PyMemberDef Payloads_members[] = {
    {"buffer", T_OBJECT_EX, offsetof(Payloads, buffer), READONLY, "the read"},
    {"spans", T_OBJECT_EX, offsetof(Payloads, spans), READONLY,
     "a (start, end) pair of native Py_ssize_t per event, into buffer"},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef Payloads_getset[] = {
    {"first", (getter)Payloads_first, NULL,
     "the first event's data when it began in an earlier read, else None", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods Payloads_as_sequence = {
    .sq_length = (lenfunc)Payloads_len,
    .sq_item = (ssizeargfunc)Payloads_item,
};

static PyMappingMethods Payloads_as_mapping = {
    .mp_length = (lenfunc)Payloads_len,
    .mp_subscript = (binaryfunc)Payloads_subscript,
};

static PyTypeObject PayloadsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "trio_cap.actors.bindings.a2a._sse_split.Payloads",
    .tp_doc = "The data of a read's SSE events, each made into bytes when asked for.",
    .tp_basicsize = sizeof(Payloads),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_SEQUENCE,
    .tp_dealloc = (destructor)Payloads_dealloc,
    .tp_as_sequence = &Payloads_as_sequence,
    .tp_as_mapping = &Payloads_as_mapping,
    .tp_members = Payloads_members,
    .tp_getset = Payloads_getset,
};

/* Where each event's data lies in the read, as it is found. */
typedef struct {
    Py_ssize_t *pairs;
    Py_ssize_t n, cap;
} Spans;

static int
add_span(Spans *spans, Py_ssize_t start, Py_ssize_t end)
{
    if (spans->n == spans->cap) {
        Py_ssize_t cap = spans->cap ? 2 * spans->cap : 64;
        Py_ssize_t *grown = PyMem_Realloc(spans->pairs, 2 * cap * sizeof(Py_ssize_t));
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        spans->pairs = grown;
        spans->cap = cap;
    }
    spans->pairs[2 * spans->n] = start;
    spans->pairs[2 * spans->n + 1] = end;
    spans->n++;
    return 0;
}

/* The Payloads of a read (buffer) whose events lie at spans; first: see Payloads. */
static PyObject *
payloads(PyObject *buffer, PyObject *first, Spans *spans)
{
    Payloads *out = PyObject_New(Payloads, &PayloadsType);
    if (out == NULL) {
        Py_XDECREF(first);
        return NULL;
    }
    out->buffer = Py_NewRef(buffer);
    out->first = first; /* the reference is the caller's, given */
    out->n = spans->n;
    out->spans = PyBytes_FromStringAndSize((const char *)spans->pairs,
                                           2 * spans->n * (Py_ssize_t)sizeof(Py_ssize_t));
    if (out->spans == NULL) {
        Py_DECREF(out);
        return NULL;
    }
    return (PyObject *)out;
}

/* The first event's data: held without its "data: " then the read's first piece, or, with
 * nothing held, the read's first piece without its first six bytes (as split_py slices). */
static PyObject *
first_data(PyObject *held, const char *chunk, Py_ssize_t len)
{
    Py_ssize_t held_len = PyBytes_GET_SIZE(held);
    if (held_len == 0) {
        Py_ssize_t skip = len < PREFIX_LEN ? len : PREFIX_LEN;
        return PyBytes_FromStringAndSize(chunk + skip, len - skip);
    }
    Py_ssize_t head = held_len > PREFIX_LEN ? held_len - PREFIX_LEN : 0;
    PyObject *data = PyBytes_FromStringAndSize(NULL, head + len);
    if (data == NULL)
        return NULL;
    char *out = PyBytes_AS_STRING(data);
    memcpy(out, PyBytes_AS_STRING(held) + (held_len - head), head);
    memcpy(out + head, chunk, len);
    return data;
}

static PyObject *
split(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2 || !PyBytes_CheckExact(args[0]) || !PyBytes_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "split(held: bytes, chunk: bytes)");
        return NULL;
    }
    PyObject *held = args[0];
    const char *const base = PyBytes_AS_STRING(args[1]);
    const char *const end = base + PyBytes_GET_SIZE(args[1]);
    const char *p = base; /* the start of the piece being read */
    Spans spans = {NULL, 0, 0};
    PyObject *first = NULL, *keep = NULL, *datas = NULL;

    for (;;) {
        const char *cr = memchr(p, '\r', end - p);
        const char *stop = cr == NULL ? end : cr;
        if (memchr(p, '\n', stop - p) != NULL)
            goto fallback; /* an LF before any CR: outside every separator */
        if (cr == NULL) {
            /* The read ends inside an event: held for the next read, "data: " restored. */
            if (spans.n == 0)
                goto fallback; /* no separator at all */
            Py_ssize_t len = end - p;
            keep = PyBytes_FromStringAndSize(NULL, PREFIX_LEN + len);
            if (keep == NULL)
                goto error;
            memcpy(PyBytes_AS_STRING(keep), SEP + SEP_LEN - PREFIX_LEN, PREFIX_LEN);
            memcpy(PyBytes_AS_STRING(keep) + PREFIX_LEN, p, len);
            break;
        }
        if (end - cr >= SEP_LEN && memcmp(cr, SEP, SEP_LEN) == 0) {
            if (spans.n == 0) {
                if (PyBytes_GET_SIZE(held) > 0) {  /* begun in an earlier read */
                    first = first_data(held, base, cr - base);
                    if (first == NULL)
                        goto error;
                }
                Py_ssize_t skip = cr - base < PREFIX_LEN ? cr - base : PREFIX_LEN;
                if (add_span(&spans, first != NULL ? 0 : skip, cr - base) < 0)
                    goto error;
            }
            else if (add_span(&spans, p - base, cr - base) < 0)
                goto error;
            p = cr + SEP_LEN;
            continue;
        }
        if (spans.n > 0 && end - cr == 4 && memcmp(cr, SEP, 4) == 0) {
            /* The read ends with an event: its CRLF CRLF, nothing held. */
            if (add_span(&spans, p - base, cr - base) < 0)
                goto error;
            keep = PyBytes_FromStringAndSize(NULL, 0);
            if (keep == NULL)
                goto error;
            break;
        }
        goto fallback; /* a CR that neither starts a separator nor ends the read */
    }
    datas = payloads(args[1], first, &spans);
    first = NULL; /* given to datas (or released with it) */
    PyMem_Free(spans.pairs);
    if (datas == NULL) {
        Py_DECREF(keep);
        return NULL;
    }
    PyObject *pair = PyTuple_New(2);
    if (pair == NULL) {
        Py_DECREF(datas);
        Py_DECREF(keep);
        return NULL;
    }
    PyTuple_SET_ITEM(pair, 0, datas);
    PyTuple_SET_ITEM(pair, 1, keep);
    return pair;

fallback:
    Py_XDECREF(first);
    PyMem_Free(spans.pairs);
    Py_RETURN_NONE;
error:
    Py_XDECREF(first);
    Py_XDECREF(keep);
    PyMem_Free(spans.pairs);
    return NULL;
}

static PyMethodDef methods[] = {
    {"split", (PyCFunction)(void (*)(void))split, METH_FASTCALL,
     "split(held, chunk) -> (datas, keep) | None: a2a-sdk's SSE framing split in the read "
     "(machine_sse.split_py is the reference)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_sse_split", "a2a-sdk's SSE framing split in C (see machine_sse.py).",
    -1, methods,
};

PyMODINIT_FUNC
PyInit__sse_split(void)
{
    if (PyType_Ready(&PayloadsType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&PayloadsType);
    if (PyModule_AddObject(m, "Payloads", (PyObject *)&PayloadsType) < 0) {
        Py_DECREF(&PayloadsType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
