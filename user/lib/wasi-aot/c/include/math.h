/* Scion's freestanding headers for wasm2c's output (user/lib/wasi-aot/c): the float
   functions the generated code names, as the compiler's builtins. A WASI program is
   compiled with SSE4.1 (the kernel saves a thread's x87 and SSE registers, XMM among
   them, with FXSAVE), where each of these is an instruction or a few: nothing is
   called. */
#ifndef SCION_MATH_H
#define SCION_MATH_H
#define isnan(x) __builtin_isnan(x)
#define signbit(x) __builtin_signbit(x)
#define INFINITY __builtin_inff()
#define NAN __builtin_nanf("")
#define floor(x) __builtin_floor(x)
#define floorf(x) __builtin_floorf(x)
#define ceil(x) __builtin_ceil(x)
#define ceilf(x) __builtin_ceilf(x)
#define trunc(x) __builtin_trunc(x)
#define truncf(x) __builtin_truncf(x)
#define nearbyint(x) __builtin_nearbyint(x)
#define nearbyintf(x) __builtin_nearbyintf(x)
#define fabs(x) __builtin_fabs(x)
#define fabsf(x) __builtin_fabsf(x)
#define sqrt(x) __builtin_sqrt(x)
#define sqrtf(x) __builtin_sqrtf(x)
#define copysign(x, y) __builtin_copysign(x, y)
#define copysignf(x, y) __builtin_copysignf(x, y)
#define fmin(x, y) __builtin_fmin(x, y)
#define fminf(x, y) __builtin_fminf(x, y)
#define fmax(x, y) __builtin_fmax(x, y)
#define fmaxf(x, y) __builtin_fmaxf(x, y)
#endif
