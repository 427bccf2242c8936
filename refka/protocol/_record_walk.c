/* The record walk of record_walk.py, compiled: the same rules, the same order of
 * checks, the same messages, one record after the other (no runs: a record costs
 * nanoseconds here, so the column-at-a-time shortcut would only add code).
 *
 * walk(data, count) takes any buffer (bytes, bytearray, memoryview) and returns
 * the list of keyless record indexes, or a str: the message of the first broken
 * rule, which record_walk.py raises as CorruptRecordError (so this module needs
 * nothing of refka's Python side). record_walk.py's docstring is the
 * specification; tests/protocol/test_record_walk.py holds both walks against
 * the reference reader there.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

typedef struct {
    const unsigned char *buf;
    Py_ssize_t end;
    Py_ssize_t pos;
    const char *error; /* a fixed message, or NULL */
} Walk;

static const char ENDS_INSIDE[] = "record data ends inside a record";

/* Java's ByteUtils.readVarint: at most 5 bytes, within 32 bits, zigzag. */
static int read_varint32(Walk *w, int64_t *out) {
    uint64_t result = 0;
    int shift = 0;
    for (;;) {
        if (w->pos >= w->end) {
            w->error = ENDS_INSIDE;
            return -1;
        }
        unsigned char b = w->buf[w->pos++];
        result |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80)
            break;
        shift += 7;
        if (shift > 28) {
            w->error = "varint longer than 5 bytes";
            return -1;
        }
    }
    if (result >> 32) {
        w->error = "varint beyond 32 bits";
        return -1;
    }
    *out = (int64_t)(result >> 1) ^ -(int64_t)(result & 1);
    return 0;
}

/* Java's ByteUtils.readVarlong, skipped: at most 10 bytes, the 10th holding bit 63 only. */
static int skip_varlong(Walk *w) {
    Py_ssize_t start = w->pos;
    for (Py_ssize_t i = start; i < start + 10; i++) {
        if (i >= w->end) {
            w->error = ENDS_INSIDE;
            return -1;
        }
        unsigned char b = w->buf[i];
        if (b < 0x80) {
            if (i == start + 9 && b > 1) {
                w->error = "varlong beyond 64 bits";
                return -1;
            }
            w->pos = i + 1;
            return 0;
        }
    }
    w->error = "varlong longer than 10 bytes";
    return -1;
}

static PyObject *refused(const char *format, ...) {
    va_list args;
    va_start(args, format);
    PyObject *message = PyUnicode_FromFormatV(format, args);
    va_end(args);
    return message;
}

/* The headers of record `index` from w->pos (at its count); -1 with w->error set or
 * a Python exception raised (MemoryError). */
static int walk_headers(Walk *w, Py_ssize_t record_end, Py_ssize_t index, PyObject **message) {
    int64_t count;
    if (read_varint32(w, &count))
        return -1;
    /* Each header takes at least two bytes: a count beyond that is not worth looping over. */
    if (count < 0 || 2 * count > record_end - w->pos) { /* Python's count > room // 2, room may be < 0 */
        *message = refused("record %zd has %lld headers", index, (long long)count);
        return -1;
    }
    for (int64_t h = 0; h < count; h++) {
        int64_t n;
        if (read_varint32(w, &n))
            return -1;
        if (n < 0) {
            w->error = "record header key is null";
            return -1;
        }
        /* Decoded as Python slices it: up to the end of the data at most. */
        Py_ssize_t available = w->end - w->pos;
        Py_ssize_t take = n < available ? (Py_ssize_t)n : (available > 0 ? available : 0);
        PyObject *key = PyUnicode_DecodeUTF8((const char *)w->buf + w->pos, take, "strict");
        if (key == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
                return -1;
            PyErr_Clear();
            w->error = "record header key is not UTF-8";
            return -1;
        }
        Py_DECREF(key);
        w->pos += (Py_ssize_t)n;
        if (read_varint32(w, &n))
            return -1;
        if (n > 0)
            w->pos += (Py_ssize_t)n;
    }
    return 0;
}

static inline int byte_at(Walk *w, Py_ssize_t pos, unsigned char *out) {
    if (pos >= w->end) {
        w->error = ENDS_INSIDE;
        return -1;
    }
    *out = w->buf[pos];
    return 0;
}

/* The keyless indexes, a str message, or NULL with an exception. */
static PyObject *walk_buffer(const unsigned char *buf, Py_ssize_t end, Py_ssize_t count) {
    Walk w = {buf, end, 0, NULL};
    PyObject *message = NULL;
    PyObject *keyless = PyList_New(0);
    if (keyless == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t length, delta, n;
        unsigned char b;
        if (read_varint32(&w, &length))
            goto broken;
        Py_ssize_t record_end = w.pos + (Py_ssize_t)length;
        if (length <= 0 || record_end > end) {
            message = refused("record %zd has length %lld with %zd bytes left", i, (long long)length, end - w.pos);
            goto broken;
        }
        w.pos += 1; /* attributes: unused by v2 records */
        if (skip_varlong(&w)) /* timestamp delta: any value */
            goto broken;
        if (read_varint32(&w, &delta))
            goto broken;
        if (delta != i) {
            message = refused("record %zd has offset delta %lld", i, (long long)delta);
            goto broken;
        }
        if (read_varint32(&w, &n)) /* key length */
            goto broken;
        if (n < 0) {
            PyObject *index = PyLong_FromSsize_t(i);
            if (index == NULL || PyList_Append(keyless, index)) {
                Py_XDECREF(index);
                goto failed;
            }
            Py_DECREF(index);
        } else {
            w.pos += (Py_ssize_t)n;
        }
        if (read_varint32(&w, &n)) /* value length */
            goto broken;
        if (n > 0)
            w.pos += (Py_ssize_t)n;
        if (byte_at(&w, w.pos, &b))
            goto broken;
        if (b == 0) { /* no headers: the common case */
            w.pos += 1;
        } else if (walk_headers(&w, record_end, i, &message)) {
            if (PyErr_Occurred())
                goto failed;
            goto broken;
        }
        if (w.pos != record_end) {
            message = refused("record %zd has length %lld, which does not match its fields", i, (long long)length);
            goto broken;
        }
    }
    if (w.pos != end) {
        message = refused("%zd bytes after the last of %zd records", end - w.pos, count);
        goto broken;
    }
    return keyless;
broken:
    Py_DECREF(keyless);
    if (message == NULL && w.error != NULL)
        message = PyUnicode_FromString(w.error);
    return message;
failed:
    Py_DECREF(keyless);
    return NULL;
}

static PyObject *walk(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "walk(data, count) takes two arguments");
        return NULL;
    }
    Py_ssize_t count = PyLong_AsSsize_t(args[1]);
    if (count == -1 && PyErr_Occurred())
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE))
        return NULL;
    PyObject *result = walk_buffer((const unsigned char *)view.buf, view.len, count);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"walk", (PyCFunction)(void (*)(void))walk, METH_FASTCALL,
     "walk(data, count) -> list of keyless record indexes, or the str message of the first broken rule"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "refka.protocol._record_walk",
    "record_walk.py's walk, compiled (see record_walk.py).", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__record_walk(void) { return PyModule_Create(&module); }
