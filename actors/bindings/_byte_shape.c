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
 * take(datas, i, segments, unread, joined=-1) -> (j, array or None, text or None, size).
 * ``datas`` is a list of bytes, or a read's Payloads (a2a/_sse_split.c: matched in place,
 * no bytes object made per payload); from index ``i`` on, each payload that has the shape
 * is taken, up to the first that has not (or is not bytes): ``j``.  A payload has the shape iff it is segments[0], a hole, segments[1],
 * ..., a hole, segments[-1], where each hole ends at the first quote in it that no
 * backslash escapes (a JSON string body holds no other) and the segment after it starts
 * there; every segment after the first starts with that closing quote.  A hole numbered
 * in the bit mask ``unread`` is only checked, and must be printable ASCII with no
 * backslash (a timestamp; anything else is no match, so nothing unchecked is let
 * through).  The array is b'["hole","hole",...]': the other holes of the taken payloads,
 * payload by payload, in order; None when nothing was taken or no hole is read.
 *
 * ``joined`` names a hole whose values the caller only wants concatenated (an artifact's
 * text chunks): then ``text`` is one JSON string, b'"' + those holes' bodies + b'"', and
 * that hole is left out of the array.  Bodies are joined only where that
 * decodes to the values joined: a body that could run into its neighbour (it starts with
 * a UTF-8 continuation byte or a low-surrogate escape, or ends in an incomplete UTF-8
 * sequence, a cut \u escape or a high-surrogate escape) ends the run before it, or, if
 * it is the run's first, makes the run give that hole in the array (text None).
 * ``size`` is the UTF-8 size of what ``text`` decodes to (0 when text is None).
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

static int
hex_in(char c, const char *set)
{
    return c != '\0' && strchr(set, c) != NULL;
}

/* Whether the body d[start:end] may be concatenated with its neighbours (see above). */
static int
joinable(const char *d, Py_ssize_t start, Py_ssize_t end)
{
    Py_ssize_t len = end - start;
    if (len == 0)
        return 1;
    const unsigned char *b = (const unsigned char *)d + start;
    if ((b[0] & 0xC0) == 0x80)
        return 0;
    if (len >= 4 && b[0] == '\\' && b[1] == 'u' && hex_in(b[2], "dD")
        && hex_in(b[3], "cdefCDEF"))
        return 0;
    for (Py_ssize_t k = len > 6 ? len - 6 : 0; k < len - 1; k++) {
        if (b[k] == '\\' && b[k + 1] == 'u') {
            if (len - k < 6)
                return 0;
            if (hex_in(b[k + 2], "dD") && hex_in(b[k + 3], "89abAB"))
                return 0;
        }
    }
    Py_ssize_t k = len - 1, follow = 0;
    while (k > 0 && (b[k] & 0xC0) == 0x80 && follow < 3) {
        k--;
        follow++;
    }
    unsigned char lead = b[k];
    if (lead < 0x80)
        return follow == 0;
    int need = (lead & 0xE0) == 0xC0 ? 1 : (lead & 0xF0) == 0xE0 ? 2 : (lead & 0xF8) == 0xF0 ? 3 : -1;
    return need == follow;
}

static int
hex_digit(unsigned char c)
{
    return c >= '0' && c <= '9' ? c - '0'
        : c >= 'a' && c <= 'f' ? c - 'a' + 10
        : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* The code unit of the 4 hex digits at p, or -1. */
static long
hex4(const char *p)
{
    long cp = 0;
    for (int k = 0; k < 4; k++) {
        int v = hex_digit((unsigned char)p[k]);
        if (v < 0)
            return -1;
        cp = cp * 16 + v;
    }
    return cp;
}

/* The UTF-8 size of the string the JSON string body b[0:len] decodes to, if it decodes: an
 * escape is shorter decoded (\n one byte, \uXXXX one to three, a surrogate pair four),
 * every other byte stays.  Why here: the driver counts an artifact's text in UTF-8 bytes,
 * and str.encode only to take a length was ~3 % of the A2A hot read.  A body that does not
 * decode gives some size; msgspec then refuses the text, and the size is not used. */
static Py_ssize_t
decoded_size(const char *b, Py_ssize_t len)
{
    const char *p = b, *end = b + len, *q;
    Py_ssize_t size = len;
    while ((q = memchr(p, '\\', end - p)) != NULL) {
        if (end - q >= 6 && q[1] == 'u') {
            long cp = hex4(q + 2);
            if (cp >= 0xD800 && cp < 0xDC00 && end - q >= 12 && q[6] == '\\' && q[7] == 'u') {
                size -= 12 - 4;
                p = q + 12;
                continue;
            }
            size -= 6 - (cp < 0x80 ? 1 : cp < 0x800 ? 2 : 3);
            p = q + 6;
        }
        else {
            size -= 1;
            p = q + 2;
        }
        if (p >= end)
            break;
    }
    return size;
}

static PyObject *
finish(Buffer *buf, const char *close, Py_ssize_t close_len)
{
    if (!buf->size) {
        PyMem_Free(buf->bytes);
        return Py_NewRef(Py_None);
    }
    PyObject *out = NULL;
    if (put(buf, close, close_len) == 0)
        out = PyBytes_FromStringAndSize(buf->bytes, buf->size);
    PyMem_Free(buf->bytes);
    return out;
}

/* Where the payloads are: a list of bytes, or a read's buffer and each payload's span in it
 * (a2a/_sse_split.c's Payloads: its `buffer`, `spans` and `first`). */
typedef struct {
    PyObject *list;
    const char *buf;
    Py_ssize_t buf_len;
    const Py_ssize_t *spans;
    PyObject *first;
    Py_ssize_t n;
} Source;

/* The Payloads attribute names, interned once: made per call they cost more than the
 * lookups. */
static PyObject *BUFFER, *SPANS, *FIRST;

static int
source_of(PyObject *datas, Source *src, PyObject **held)
{
    *held = NULL;
    if (PyList_Check(datas)) {
        src->list = datas;
        src->n = PyList_GET_SIZE(datas);
        return 0;
    }
    PyObject *buffer = PyObject_GetAttr(datas, BUFFER);
    PyObject *spans = buffer == NULL ? NULL : PyObject_GetAttr(datas, SPANS);
    PyObject *first = spans == NULL ? NULL : PyObject_GetAttr(datas, FIRST);
    if (first == NULL || !PyBytes_CheckExact(buffer) || !PyBytes_CheckExact(spans)
        || PyBytes_GET_SIZE(spans) % (2 * (Py_ssize_t)sizeof(Py_ssize_t)) != 0
        || (first != Py_None && !PyBytes_CheckExact(first))) {
        Py_XDECREF(buffer);
        Py_XDECREF(spans);
        Py_XDECREF(first);
        PyErr_Clear();
        PyErr_SetString(PyExc_TypeError,
                        "take's datas is a list of bytes or a read's Payloads");
        return -1;
    }
    PyObject *keep = PyTuple_Pack(3, buffer, spans, first);
    Py_DECREF(buffer);
    Py_DECREF(spans);
    Py_DECREF(first);
    if (keep == NULL)
        return -1;
    *held = keep;  /* keeps the three alive while they are read */
    src->list = NULL;
    src->buf = PyBytes_AS_STRING(buffer);
    src->buf_len = PyBytes_GET_SIZE(buffer);
    src->spans = (const Py_ssize_t *)PyBytes_AS_STRING(spans);
    src->first = first == Py_None ? NULL : first;
    src->n = PyBytes_GET_SIZE(spans) / (2 * (Py_ssize_t)sizeof(Py_ssize_t));
    return 0;
}

/* Payload k's bytes, 1; 0 if it is not bytes (a list's item) or lies outside the buffer. */
static int
payload_at(const Source *src, Py_ssize_t k, const char **d, Py_ssize_t *len)
{
    if (src->list != NULL) {
        PyObject *item = PyList_GET_ITEM(src->list, k);
        if (!PyBytes_CheckExact(item))
            return 0;
        *d = PyBytes_AS_STRING(item);
        *len = PyBytes_GET_SIZE(item);
        return 1;
    }
    if (k == 0 && src->first != NULL) {
        *d = PyBytes_AS_STRING(src->first);
        *len = PyBytes_GET_SIZE(src->first);
        return 1;
    }
    Py_ssize_t start = src->spans[2 * k], end = src->spans[2 * k + 1];
    if (start < 0 || end < start || end > src->buf_len)
        return 0;
    *d = src->buf + start;
    *len = end - start;
    return 1;
}

/* Called once per run of events, so its arguments are read without PyArg_ParseTuple. */
static PyObject *
take(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs < 4 || nargs > 5) {
        PyErr_SetString(PyExc_TypeError, "take(datas, i, segments, unread, joined=-1)");
        return NULL;
    }
    PyObject *datas = args[0], *segments = args[2];
    if (!PyTuple_Check(segments)) {
        PyErr_SetString(PyExc_TypeError, "take's segments are a tuple");
        return NULL;
    }
    Py_ssize_t i = PyLong_AsSsize_t(args[1]);
    if (i == -1 && PyErr_Occurred())
        return NULL;
    unsigned long unread = PyLong_AsUnsignedLong(args[3]);
    if (unread == (unsigned long)-1 && PyErr_Occurred())
        return NULL;
    Py_ssize_t joined = nargs == 5 ? PyLong_AsSsize_t(args[4]) : -1;
    if (joined == -1 && PyErr_Occurred())
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
    if (joined < -1 || joined >= holes || (joined >= 0 && (unread >> joined) & 1)) {
        PyErr_SetString(PyExc_ValueError, "the joined hole is a read hole of the shape");
        return NULL;
    }
    Source src;
    PyObject *held;
    if (source_of(datas, &src, &held) < 0)
        return NULL;
    Buffer buf = {NULL, 0, 0}, text = {NULL, 0, 0};
    Py_ssize_t starts[MAX_SEGMENTS], ends[MAX_SEGMENTS];
    Py_ssize_t j = i, n = src.n;
    for (; j < n; j++) {
        const char *d;
        Py_ssize_t d_len;
        if (!payload_at(&src, j, &d, &d_len)
            || !match(d, d_len, seg, seg_len, holes, fixed, unread, starts, ends))
            break;
        if (joined >= 0 && !joinable(d, starts[joined], ends[joined])) {
            if (j > i)
                break;  /* the run so far is joined; this one starts the next */
            joined = -1;  /* the run's first: this run gives that hole in the array */
        }
        for (Py_ssize_t k = 0; k < holes; k++) {
            if ((unread >> k) & 1)
                continue;
            int fail;
            if (k == joined)
                fail = put(&text, "\"", text.size ? 0 : 1) < 0
                    || put(&text, d + starts[k], ends[k] - starts[k]) < 0;
            else
                fail = put(&buf, buf.size ? "\",\"" : "[\"", buf.size ? 3 : 2) < 0
                    || put(&buf, d + starts[k], ends[k] - starts[k]) < 0;
            if (fail) {
                PyMem_Free(buf.bytes);
                PyMem_Free(text.bytes);
                Py_XDECREF(held);
                return NULL;
            }
        }
    }
    Py_XDECREF(held);
    Py_ssize_t size = text.size ? decoded_size(text.bytes + 1, text.size - 1) : 0;
    PyObject *array = finish(&buf, "\"]", 2);
    PyObject *joined_text = array == NULL ? NULL : finish(&text, "\"", 1);
    if (array == NULL) {
        PyMem_Free(text.bytes);
        return NULL;
    }
    if (joined_text == NULL) {
        Py_DECREF(array);
        return NULL;
    }
    return Py_BuildValue("nNNn", j, array, joined_text, size);
}

static PyMethodDef methods[] = {
    {"take", (PyCFunction)(void (*)(void))take, METH_FASTCALL,
     "take(datas, i, segments, unread, joined=-1) -> (j, array or None, text or None, size): "
     "the payloads of datas[i:] that have the shape, up to the first that has "
     "not, their read holes as a JSON array of strings, the joined hole's as one string "
     "and the UTF-8 size of what that string decodes to."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_byte_shape",
    "A run of payloads matched against a byte shape (see byte_shape.py).", -1, methods,
};

PyMODINIT_FUNC
PyInit__byte_shape(void)
{
    if ((BUFFER = PyUnicode_InternFromString("buffer")) == NULL
        || (SPANS = PyUnicode_InternFromString("spans")) == NULL
        || (FIRST = PyUnicode_InternFromString("first")) == NULL)
        return NULL;
    return PyModule_Create(&module);
}
