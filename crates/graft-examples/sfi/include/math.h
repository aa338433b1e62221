/* Scion's freestanding headers for wasm2c's output (crates/graft-examples/sfi). The servers are
   soft-float and a graft may use no floating point: these declarations only let the
   generated file's unused float helpers parse. Nothing defines them, and the images
   are compiled with general registers only, so a module that does use a float fails
   to compile or to link: it is refused at build time. */
#ifndef SCION_MATH_H
#define SCION_MATH_H
#define isnan(x) __builtin_isnan(x)
#define signbit(x) __builtin_signbit(x)
#define INFINITY __builtin_inff()
#define NAN __builtin_nanf("")
double floor(double); float floorf(float);
double ceil(double); float ceilf(float);
double trunc(double); float truncf(float);
double nearbyint(double); float nearbyintf(float);
double fabs(double); float fabsf(float);
double sqrt(double); float sqrtf(float);
double copysign(double, double); float copysignf(float, float);
double fmin(double, double); float fminf(float, float);
double fmax(double, double); float fmaxf(float, float);
#endif
