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
 * every event the read completes; keep: what to hold for the next read.  None: the read
 * has fewer than one separator or a line break outside the separators (the general line
 * rules take it).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

static const char SEP[] = "\r\n\r\ndata: ";
#define SEP_LEN 10
#define PREFIX_LEN 6 /* "data: " */

/* Append a new bytes object (the len bytes at start) to list; -1 on error. */
static int
append(PyObject *list, const char *start, Py_ssize_t len)
{
    PyObject *data = PyBytes_FromStringAndSize(start, len);
    if (data == NULL)
        return -1;
    int rc = PyList_Append(list, data);
    Py_DECREF(data);
    return rc;
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
    if (nargs != 2 || !PyBytes_CheckExact(args[0]) || !PyBytes_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "split(held: bytes, chunk: bytes)");
        return NULL;
    }
    PyObject *held = args[0];
    const char *const base = PyBytes_AS_STRING(args[1]);
    const char *const end = base + PyBytes_GET_SIZE(args[1]);
    const char *p = base; /* the start of the piece being read */
    PyObject *datas = NULL, *keep = NULL;

    for (;;) {
        const char *cr = memchr(p, '\r', end - p);
        const char *stop = cr == NULL ? end : cr;
        if (memchr(p, '\n', stop - p) != NULL)
            goto fallback; /* an LF before any CR: outside every separator */
        if (cr == NULL) {
            /* The read ends inside an event: held for the next read, "data: " restored. */
            if (datas == NULL)
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
            if (datas == NULL) {
                if ((datas = PyList_New(1)) == NULL)
                    goto error;
                PyObject *first = first_data(held, base, cr - base);
                if (first == NULL)
                    goto error;
                PyList_SET_ITEM(datas, 0, first);
            }
            else if (append(datas, p, cr - p) < 0)
                goto error;
            p = cr + SEP_LEN;
            continue;
        }
        if (datas != NULL && end - cr == 4 && memcmp(cr, SEP, 4) == 0) {
            /* The read ends with an event: its CRLF CRLF, nothing held. */
            if (append(datas, p, cr - p) < 0)
                goto error;
            keep = PyBytes_FromStringAndSize(NULL, 0);
            if (keep == NULL)
                goto error;
            break;
        }
        goto fallback; /* a CR that neither starts a separator nor ends the read */
    }
    PyObject *pair = PyTuple_New(2);
    if (pair == NULL)
        goto error;
    PyTuple_SET_ITEM(pair, 0, datas);
    PyTuple_SET_ITEM(pair, 1, keep);
    return pair;

fallback:
    Py_XDECREF(datas);
    Py_RETURN_NONE;
error:
    Py_XDECREF(datas);
    Py_XDECREF(keep);
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
    return PyModule_Create(&module);
}
