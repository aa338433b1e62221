/* Scion's runtime for a WASI program translated to C by wasm2c (WABT 1.0.32) and
   compiled into a Scion program (user/lib/wasi-aot): the types and functions the
   generated code names. harness.c and the Rust side of the program (src/lib.rs)
   define the functions.

   - Linear memory is checked explicitly on every access (wasm2c's bounds-check mode:
     no guard pages; xtask writes the test as `address > size - width`, the grafts'
     form). It lives in the program's heap, from its memory server under its limit;
     `memory.grow` moves it (every access reloads its place).
   - The stack: the program runs on a stack of its own (`SCION_WASI_STACK`, from the
     heap); every generated function checks on entry that the stack pointer is above
     the stack's floor plus a margin — larger than any one frame may be (xtask's
     -Werror=frame-larger-than) with what a call of the runtime or of a WASI import
     takes — and traps (EXHAUSTION) otherwise, so no recursion leaves the stack.
   - Tables hold functions and the generated code checks an indirect call's index,
     presence and type before it is made.
   - A trap ends the program (the Rust side's `wasm_rt_trap`: a line saying which, exit
     status 134). */
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
/* The stack is checked by its pointer (SCION_STACK_CHECK, put into wasm2c's function
   prologue by xtask), not by a count of calls. */
#define WASM_RT_USE_STACK_DEPTH_COUNT 0
/* The lowest stack pointer a function may start its body at (the stack's floor plus
   SCION_WASI_STACK_MARGIN): harness.c's, set before the module runs. */
extern uintptr_t scion_wasi_stack_limit;
#define SCION_STACK_CHECK()                                                \
  do {                                                                     \
    uintptr_t sp_;                                                         \
    __asm__ volatile("mov %%rsp, %0" : "=r"(sp_));                         \
    if (UNLIKELY(sp_ < scion_wasi_stack_limit)) TRAP(EXHAUSTION);          \
  } while (0)

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
} wasm_rt_trap_t;

typedef enum {
  WASM_RT_I32,
  WASM_RT_I64,
  WASM_RT_F32,
  WASM_RT_F64,
  WASM_RT_FUNCREF,
  WASM_RT_EXTERNREF,
} wasm_rt_type_t;

typedef void (*wasm_rt_function_ptr_t)(void);

/* (The Rust side's `FuncRef`: the same layout.) */
typedef struct {
  uint32_t func_type;
  wasm_rt_function_ptr_t func;
  void* module_instance;
} wasm_rt_funcref_t;

#define wasm_rt_funcref_null_value ((wasm_rt_funcref_t){0, NULL, NULL})

typedef void* wasm_rt_externref_t;
#define wasm_rt_externref_null_value ((wasm_rt_externref_t)0)

/* A linear memory: `size` bytes at `data`, `pages` of 64 KiB of at most `max_pages`
   (the Rust side's `Memory`: the same layout). */
typedef struct {
  uint8_t* data;
  uint64_t pages;
  uint64_t max_pages;
  uint64_t size;
} wasm_rt_memory_t;

/* A table: `size` entries at `data`, at most `max_size` (the Rust side's `Table`). */
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
void wasm_rt_allocate_funcref_table(wasm_rt_funcref_table_t*, uint32_t elements, uint32_t max_elements);
void wasm_rt_allocate_externref_table(wasm_rt_externref_table_t*, uint32_t elements, uint32_t max_elements);
void wasm_rt_free_funcref_table(wasm_rt_funcref_table_t*);
void wasm_rt_free_externref_table(wasm_rt_externref_table_t*);
uint32_t wasm_rt_grow_funcref_table(wasm_rt_funcref_table_t*, uint32_t delta, wasm_rt_funcref_t init);
uint32_t wasm_rt_grow_externref_table(wasm_rt_externref_table_t*, uint32_t delta, wasm_rt_externref_t init);

#endif
