/* The ACP hot read's inner loop in C: a read's notifications -> runs of text chunks.
 *
 * Why C: in Python the loop reads nine Struct fields and makes four checks per chunk,
 * ~1,300 instructions; that was a sixth of the whole bytes -> CAP events drive.  Here a
 * field is one load at the offset its member descriptor names (msgspec keeps every
 * field in a slot), after the object's exact type was checked against the types the
 * offsets were read from.  runs.py holds the same loop in Python: the reference this
 * one is tested against (tests/driver_acp/test_runs.py) and the fallback when no C
 * compiler was there at install.
 *
 * join_runs(items, layout) -> list.  Every item is a notification of the layout's
 * message type.  Consecutive text chunks of one kind and one message id, neither the
 * update nor its block carrying _meta, become one entry (kind, message_id, text), the
 * texts joined; every other update is an entry of its own, the update itself.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

typedef struct {
    PyObject_HEAD
    PyTypeObject *message_t, *note_t, *chunk_t[2], *text_t;
    PyObject *unset;
    Py_ssize_t params, update, content[2], message_id[2], meta[2], text, text_meta;
} Layout;

static int
offset_of(PyTypeObject *type, const char *name, Py_ssize_t *offset)
{
    PyObject *descr = PyObject_GetAttrString((PyObject *)type, name);
    if (descr == NULL)
        return -1;
    int ok = Py_IS_TYPE(descr, &PyMemberDescr_Type)
        && ((PyMemberDescrObject *)descr)->d_member->type == T_OBJECT_EX;
    if (ok)
        *offset = ((PyMemberDescrObject *)descr)->d_member->offset;
    Py_DECREF(descr);
    if (!ok) {
        PyErr_Format(PyExc_TypeError, "%s.%s is not a Struct field", type->tp_name, name);
        return -1;
    }
    return 0;
}

static int
Layout_init(Layout *self, PyObject *args, PyObject *kwds)
{
    PyTypeObject *message_t, *note_t, *message_chunk_t, *thought_chunk_t, *text_t;
    PyObject *unset;
    static char *names[] = {"message", "note", "message_chunk", "thought_chunk", "text",
                            "unset", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!O!O!O!O!O:Layout", names,
                                     &PyType_Type, &message_t, &PyType_Type, &note_t,
                                     &PyType_Type, &message_chunk_t, &PyType_Type,
                                     &thought_chunk_t, &PyType_Type, &text_t, &unset))
        return -1;
    PyTypeObject *chunks[2] = {message_chunk_t, thought_chunk_t};
    if (offset_of(message_t, "params", &self->params) < 0
        || offset_of(note_t, "update", &self->update) < 0
        || offset_of(text_t, "text", &self->text) < 0
        || offset_of(text_t, "meta", &self->text_meta) < 0)
        return -1;
    for (int k = 0; k < 2; k++) {
        if (offset_of(chunks[k], "content", &self->content[k]) < 0
            || offset_of(chunks[k], "message_id", &self->message_id[k]) < 0
            || offset_of(chunks[k], "meta", &self->meta[k]) < 0)
            return -1;
    }
    PyTypeObject *held[] = {message_t, note_t, message_chunk_t, thought_chunk_t, text_t};
    for (int k = 0; k < 5; k++)
        Py_INCREF(held[k]);
    Py_INCREF(unset);
    Py_XSETREF(self->message_t, message_t);
    Py_XSETREF(self->note_t, note_t);
    Py_XSETREF(self->chunk_t[0], message_chunk_t);
    Py_XSETREF(self->chunk_t[1], thought_chunk_t);
    Py_XSETREF(self->text_t, text_t);
    Py_XSETREF(self->unset, unset);
    return 0;
}

static void
Layout_dealloc(Layout *self)
{
    Py_XDECREF(self->message_t);
    Py_XDECREF(self->note_t);
    Py_XDECREF(self->chunk_t[0]);
    Py_XDECREF(self->chunk_t[1]);
    Py_XDECREF(self->text_t);
    Py_XDECREF(self->unset);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject LayoutType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "trio_cap.actors.bindings.acp._runs.Layout",
    .tp_doc = "Where the hot read's fields are in one session's notification types.",
    .tp_basicsize = sizeof(Layout),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Layout_init,
    .tp_dealloc = (destructor)Layout_dealloc,
};

/* The field at `offset` of an object whose exact type was checked (never NULL in a
 * decoded Struct; a NULL is reported rather than read). */
static inline PyObject *
field(PyObject *obj, Py_ssize_t offset)
{
    PyObject *value = *(PyObject **)((char *)obj + offset);
    if (value == NULL)
        PyErr_Format(PyExc_AttributeError, "a %s field is unset", Py_TYPE(obj)->tp_name);
    return value;
}

/* The run so far as one entry appended to `out`; the run is then empty. */
static int
flush(PyObject *out, PyTypeObject *kind, PyObject **run_id, PyObject *parts)
{
    static PyObject *empty = NULL;
    if (empty == NULL && (empty = PyUnicode_FromStringAndSize(NULL, 0)) == NULL)
        return -1;
    PyObject *text = PyList_GET_SIZE(parts) == 1 ? Py_NewRef(PyList_GET_ITEM(parts, 0))
                                                 : PyUnicode_Join(empty, parts);
    if (text == NULL)
        return -1;
    PyObject *entry = PyTuple_Pack(3, (PyObject *)kind, *run_id, text);
    Py_DECREF(text);
    Py_CLEAR(*run_id);
    if (entry == NULL || PyList_SetSlice(parts, 0, PyList_GET_SIZE(parts), NULL) < 0) {
        Py_XDECREF(entry);
        return -1;
    }
    int rc = PyList_Append(out, entry);
    Py_DECREF(entry);
    return rc;
}

static PyObject *
join_runs(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyList_Check(args[0]) || !Py_IS_TYPE(args[1], &LayoutType)) {
        PyErr_SetString(PyExc_TypeError, "join_runs(items: list, layout: Layout)");
        return NULL;
    }
    PyObject *items = args[0];
    Layout *L = (Layout *)args[1];
    PyObject *out = PyList_New(0), *parts = PyList_New(0);
    PyTypeObject *run_kind = NULL;
    PyObject *run_id = NULL;
    if (out == NULL || parts == NULL)
        goto error;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(items); i++) {
        PyObject *item = PyList_GET_ITEM(items, i), *params, *update;
        if (!Py_IS_TYPE(item, L->message_t)) {
            PyErr_Format(PyExc_TypeError, "join_runs: an item of type %s",
                         Py_TYPE(item)->tp_name);
            goto error;
        }
        if ((params = field(item, L->params)) == NULL)
            goto error;
        if (!Py_IS_TYPE(params, L->note_t)) {
            PyErr_Format(PyExc_TypeError, "join_runs: params of type %s",
                         Py_TYPE(params)->tp_name);
            goto error;
        }
        if ((update = field(params, L->update)) == NULL)
            goto error;
        PyTypeObject *kind = Py_TYPE(update);
        int k = kind == L->chunk_t[0] ? 0 : kind == L->chunk_t[1] ? 1 : -1;
        if (k >= 0) {
            PyObject *content = field(update, L->content[k]);
            PyObject *mid = field(update, L->message_id[k]);
            PyObject *meta = field(update, L->meta[k]);
            if (content == NULL || mid == NULL || meta == NULL)
                goto error;
            if (Py_IS_TYPE(content, L->text_t) && meta == L->unset) {
                PyObject *text_meta = field(content, L->text_meta);
                PyObject *text = field(content, L->text);
                if (text_meta == NULL || text == NULL)
                    goto error;
                if (text_meta == L->unset) {
                    int same = 0;
                    if (kind == run_kind
                        && (same = PyObject_RichCompareBool(mid, run_id, Py_EQ)) < 0)
                        goto error;
                    if (!same && run_kind != NULL && flush(out, run_kind, &run_id, parts) < 0)
                        goto error;
                    if (!same) {
                        run_kind = kind;
                        run_id = Py_NewRef(mid);
                    }
                    if (PyList_Append(parts, text) < 0)
                        goto error;
                    continue;
                }
            }
        }
        if (run_kind != NULL) {
            if (flush(out, run_kind, &run_id, parts) < 0)
                goto error;
            run_kind = NULL;
        }
        if (PyList_Append(out, update) < 0)
            goto error;
    }
    if (run_kind != NULL && flush(out, run_kind, &run_id, parts) < 0)
        goto error;
    Py_DECREF(parts);
    return out;
error:
    Py_XDECREF(out);
    Py_XDECREF(parts);
    Py_XDECREF(run_id);
    return NULL;
}

static PyMethodDef methods[] = {
    {"join_runs", (PyCFunction)(void (*)(void))join_runs, METH_FASTCALL,
     "join_runs(items, layout) -> entries: (kind, message_id, text) per run of text "
     "chunks, the update itself for anything else."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_runs", "The ACP hot read's chunk runs (see runs.py).", -1,
    methods,
};

PyMODINIT_FUNC
PyInit__runs(void)
{
    if (PyType_Ready(&LayoutType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&LayoutType);
    if (PyModule_AddObject(m, "Layout", (PyObject *)&LayoutType) < 0) {
        Py_DECREF(&LayoutType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
