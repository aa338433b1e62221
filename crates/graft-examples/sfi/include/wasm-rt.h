/* Scion's runtime for WebAssembly translated to C by wasm2c (WABT 1.0.32): the types
   and functions the generated code names, written for Scion (harness.c defines the
   functions, inside each graft's image). Linear memory is checked explicitly on every
   access (no guard pages: a Scion server has no signal to catch a fault with), calls
   are counted (a graft recursing too deep traps), and a trap leaves the graft's call
   through harness.c's own non-local exit. Tables are not supported: nothing defines
   their functions, so a module with a table does not link and is refused at build. */
#ifndef SCION_WASM_RT_H
#define SCION_WASM_RT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)
#define wasm_rt_memcpy __builtin_memcpy
#define wasm_rt_unreachable __builtin_unreachable

/* Explicit bounds checks on every load and store. */
#define WASM_RT_MEMCHECK_SIGNAL_HANDLER 0
/* Call depth counted: past the limit a call traps (EXHAUSTION). With every frame the
   compiler makes at most 256 bytes (xtask's -Werror=frame-larger-than), a graft takes
   at most 16 KiB of the server's stack (64 KiB, the main thread's). */
#define WASM_RT_USE_STACK_DEPTH_COUNT 1
#define WASM_RT_MAX_CALL_STACK_DEPTH 64
/* harness.c's, and only its (one translation unit): a static. */
static uint32_t wasm_rt_call_stack_depth;

typedef enum {
  WASM_RT_TRAP_NONE,
  WASM_RT_TRAP_OOB,
  WASM_RT_TRAP_INT_OVERFLOW,
  WASM_RT_TRAP_DIV_BY_ZERO,
  WASM_RT_TRAP_INVALID_CONVERSION,
  WASM_RT_TRAP_UNREACHABLE,
  WASM_RT_TRAP_CALL_INDIRECT,
  WASM_RT_TRAP_UNCAUGHT_EXCEPTION,
  WASM_RT_TRAP_EXHAUSTION,
  /* Scion's: the server's watchdog stopped the call (`rt::guard::IMAGE_STOPPED`). */
  WASM_RT_TRAP_SCION_STOPPED,
} wasm_rt_trap_t;

/* Set by every store to linear memory and bulk operation (xtask's `sfi_patch` puts it
   into wasm2c's output): the call may have written the state (the server's undo copy
   is then taken again before the next call). */
static uint8_t scion_sfi_wrote;
#define SCION_SFI_WROTE() (scion_sfi_wrote = 1)

typedef enum {
  WASM_RT_I32,
  WASM_RT_I64,
  WASM_RT_F32,
  WASM_RT_F64,
  WASM_RT_FUNCREF,
  WASM_RT_EXTERNREF,
} wasm_rt_type_t;

typedef void (*wasm_rt_function_ptr_t)(void);

typedef struct {
  uint32_t func_type;
  wasm_rt_function_ptr_t func;
  void* module_instance;
} wasm_rt_funcref_t;

typedef void* wasm_rt_externref_t;
#define wasm_rt_externref_null_value ((wasm_rt_externref_t)0)

/* A linear memory: `size` bytes at `data`, `pages` of 64 KiB of at most `max_pages`. */
typedef struct {
  uint8_t* data;
  uint64_t pages;
  uint64_t max_pages;
  uint64_t size;
} wasm_rt_memory_t;

typedef struct {
  wasm_rt_funcref_t* data;
  uint32_t max_size;
  uint32_t size;
} wasm_rt_funcref_table_t;

typedef struct {
  wasm_rt_externref_t* data;
  uint32_t max_size;
  uint32_t size;
} wasm_rt_externref_table_t;

bool wasm_rt_is_initialized(void);
__attribute__((noreturn)) void wasm_rt_trap(wasm_rt_trap_t);
uint32_t wasm_rt_register_func_type(uint32_t params, uint32_t results, ...);
void wasm_rt_allocate_memory(wasm_rt_memory_t*, uint32_t initial_pages, uint32_t max_pages);
uint32_t wasm_rt_grow_memory(wasm_rt_memory_t*, uint32_t pages);
void wasm_rt_free_memory(wasm_rt_memory_t*);
/* Declared, defined nowhere: a module with a table does not link. */
void wasm_rt_allocate_funcref_table(wasm_rt_funcref_table_t*, uint32_t elements, uint32_t max_elements);
void wasm_rt_allocate_externref_table(wasm_rt_externref_table_t*, uint32_t elements, uint32_t max_elements);
void wasm_rt_free_funcref_table(wasm_rt_funcref_table_t*);
void wasm_rt_free_externref_table(wasm_rt_externref_table_t*);
uint32_t wasm_rt_grow_funcref_table(wasm_rt_funcref_table_t*, uint32_t delta, wasm_rt_funcref_t init);
uint32_t wasm_rt_grow_externref_table(wasm_rt_externref_table_t*, uint32_t delta, wasm_rt_externref_t init);

#endif
