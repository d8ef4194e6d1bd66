/* A run of payloads matched against a learnt byte shape, in C (byte_shape.py says what a
 * shape is and why matching it is the full typed decode).
 *
 * Why C: a turn's text events are ~95 % of an A2A stream.  In Python each costs a slice
 * per hole, an endswith, and its share of a join and a compare; that was half of the whole
 * SSE bytes -> CAP events drive.  Here a payload costs two memcmp (its constant segments)
 * and a memchr per hole, and its holes are copied once, into the JSON array msgspec then
 * decodes as one list of strings.  byte_shape.py holds the same match in Python: the
 * reference this one is tested against (tests/driver_a2a/test_shape_native.py) and the
 * fallback when no C compiler was there at install.
 *
 * take(datas, i, segments, unread) -> (j, array or None).  ``datas`` is a list; from index
 * ``i`` on, each payload that has the shape is taken, up to the first that has not (or is
 * not bytes): ``j``.  A payload has the shape iff it is segments[0], a hole, segments[1],
 * ..., a hole, segments[-1], where each hole ends at the first quote in it that no
 * backslash escapes (a JSON string body holds no other) and the segment after it starts
 * there; every segment after the first starts with that closing quote.  A hole numbered
 * in the bit mask ``unread`` is only checked, and must be printable ASCII with no
 * backslash (a timestamp; anything else is no match, so nothing unchecked is let
 * through).  The array is b'["hole","hole",...]': the other holes of the taken payloads,
 * payload by payload, in order; None when nothing was taken or no hole is read.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#define MAX_SEGMENTS 17

typedef struct {
    char *bytes;
    Py_ssize_t size, cap;
} Buffer;

static int
put(Buffer *buf, const char *bytes, Py_ssize_t size)
{
    if (buf->size + size > buf->cap) {
        Py_ssize_t cap = buf->cap ? buf->cap : 4096;
        while (cap < buf->size + size)
            cap *= 2;
        char *grown = PyMem_Realloc(buf->bytes, cap);
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        buf->bytes = grown;
        buf->cap = cap;
    }
    memcpy(buf->bytes + buf->size, bytes, size);
    buf->size += size;
    return 0;
}

/* Where the hole starting at ``at`` ends: its first quote no backslash escapes, or -1. */
static Py_ssize_t
hole_end(const char *d, Py_ssize_t at, Py_ssize_t len)
{
    Py_ssize_t from = at;
    while (from < len) {
        const char *q = memchr(d + from, '"', len - from);
        if (q == NULL)
            return -1;
        Py_ssize_t end = q - d, back = end;
        while (back > at && d[back - 1] == '\\')
            back--;
        if ((end - back) % 2 == 0)
            return end;
        from = end + 1;
    }
    return -1;
}

static int
plain_ascii(const char *d, Py_ssize_t start, Py_ssize_t end)
{
    for (Py_ssize_t k = start; k < end; k++) {
        unsigned char c = (unsigned char)d[k];
        if (c < 0x20 || c > 0x7e || c == '\\')
            return 0;
    }
    return 1;
}

/* The holes of payload ``d`` (starts and ends) if it has the shape, 1; else 0. */
static int
match(const char *d, Py_ssize_t len, const char *const *seg, const Py_ssize_t *seg_len,
      Py_ssize_t holes, Py_ssize_t fixed, unsigned long unread, Py_ssize_t *starts,
      Py_ssize_t *ends)
{
    if (len < fixed || memcmp(d, seg[0], seg_len[0]) != 0)
        return 0;
    Py_ssize_t at = seg_len[0];
    for (Py_ssize_t k = 0; k < holes; k++) {
        Py_ssize_t end = hole_end(d, at, len);
        const Py_ssize_t next = seg_len[k + 1];
        if (end < 0 || end + next > len || memcmp(d + end, seg[k + 1], next) != 0)
            return 0;
        if ((unread >> k) & 1 && !plain_ascii(d, at, end))
            return 0;
        starts[k] = at;
        ends[k] = end;
        at = end + next;
    }
    return at == len;
}

static PyObject *
take(PyObject *module, PyObject *args)
{
    PyObject *datas, *segments;
    Py_ssize_t i;
    unsigned long unread;
    if (!PyArg_ParseTuple(args, "O!nO!k:take", &PyList_Type, &datas, &i, &PyTuple_Type,
                          &segments, &unread))
        return NULL;
    Py_ssize_t count = PyTuple_GET_SIZE(segments), holes = count - 1;
    if (count < 2 || count > MAX_SEGMENTS) {
        PyErr_SetString(PyExc_ValueError, "a shape has 2 to 17 segments");
        return NULL;
    }
    const char *seg[MAX_SEGMENTS];
    Py_ssize_t seg_len[MAX_SEGMENTS], fixed = 0;
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *s = PyTuple_GET_ITEM(segments, k);
        if (!PyBytes_CheckExact(s)) {
            PyErr_SetString(PyExc_TypeError, "a shape's segments are bytes");
            return NULL;
        }
        seg[k] = PyBytes_AS_STRING(s);
        seg_len[k] = PyBytes_GET_SIZE(s);
        if (k > 0 && (seg_len[k] == 0 || seg[k][0] != '"')) {
            PyErr_SetString(PyExc_ValueError,
                            "a segment after a hole starts with its closing quote");
            return NULL;
        }
        fixed += seg_len[k];
    }
    if (i < 0) {
        PyErr_SetString(PyExc_IndexError, "take from a negative index");
        return NULL;
    }
    int reads_any = 0;
    for (Py_ssize_t k = 0; k < holes; k++)
        reads_any |= !((unread >> k) & 1);
    Buffer buf = {NULL, 0, 0};
    Py_ssize_t starts[MAX_SEGMENTS], ends[MAX_SEGMENTS];
    Py_ssize_t j = i, n = PyList_GET_SIZE(datas);
    for (; j < n; j++) {
        PyObject *item = PyList_GET_ITEM(datas, j);
        if (!PyBytes_CheckExact(item))
            break;
        const char *d = PyBytes_AS_STRING(item);
        if (!match(d, PyBytes_GET_SIZE(item), seg, seg_len, holes, fixed, unread, starts,
                   ends))
            break;
        if (!reads_any)
            continue;
        for (Py_ssize_t k = 0; k < holes; k++) {
            if ((unread >> k) & 1)
                continue;
            if (put(&buf, buf.size ? "\",\"" : "[\"", buf.size ? 3 : 2) < 0
                || put(&buf, d + starts[k], ends[k] - starts[k]) < 0) {
                PyMem_Free(buf.bytes);
                return NULL;
            }
        }
    }
    PyObject *array;
    if (buf.size) {
        if (put(&buf, "\"]", 2) < 0) {
            PyMem_Free(buf.bytes);
            return NULL;
        }
        array = PyBytes_FromStringAndSize(buf.bytes, buf.size);
        PyMem_Free(buf.bytes);
        if (array == NULL)
            return NULL;
    }
    else {
        PyMem_Free(buf.bytes);
        array = Py_NewRef(Py_None);
    }
    PyObject *result = Py_BuildValue("nN", j, array);
    return result;
}

static PyMethodDef methods[] = {
    {"take", take, METH_VARARGS,
     "take(datas, i, segments, unread) -> (j, array or None): the payloads of datas[i:] "
     "that have the shape, up to the first that has not, and their read holes as a JSON "
     "array of strings."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_byte_shape",
    "A run of payloads matched against a byte shape (see byte_shape.py).", -1, methods,
};

PyMODINIT_FUNC
PyInit__byte_shape(void)
{
    return PyModule_Create(&module);
}
