/* Whether this CPU runs the kernels built for x86-64-v3 (structlp.compiled).
 *
 * x86-64-v3 is the x86-64 level with AVX, AVX2, BMI1, BMI2, F16C, FMA, LZCNT, MOVBE and
 * XSAVE (Intel Haswell, AMD Excavator and later).  The compiler's CPU detection also
 * checks that the operating system saves the AVX registers.  Anything else (another
 * architecture, another compiler) answers no, and the generic build is used. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *
x86_64_v3(PyObject *self, PyObject *unused)
{
    int ok = 0;
#if (defined(__x86_64__) || defined(_M_X64)) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
    ok = __builtin_cpu_supports("x86-64-v3") != 0;
#else
    ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")
         && __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2");
#endif
#endif
    return PyBool_FromLong(ok);
}

static PyMethodDef methods[] = {
    {"x86_64_v3", x86_64_v3, METH_NOARGS,
     "Whether this CPU (and its operating system) supports the x86-64-v3 instruction set."},
    {NULL, NULL, 0, NULL}
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_cpu",
    "CPU detection for structlp's compiled kernels.", -1, methods
};

PyMODINIT_FUNC
PyInit__cpu(void)
{
    return PyModule_Create(&module);
}
