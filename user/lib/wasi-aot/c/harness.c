/* Scion's harness around one WASI program translated to C by wasm2c (`wasi.c`, made
   with `wasm2c -n wasi`): the part of the runtime best written in C (function types,
   the stack switch) and the entry the Rust side calls, `scion_wasi_run`. Compiled by
   xtask with the generated code as one translation unit (the module's instance is this
   file's static: the compiler may keep its memory's place and size in registers across
   a loop), for x86-64 with SSE4.1, and linked with the Rust side
   (`libwasi_aot.a`) into an ordinary Scion program.

   The rest of the runtime (memories, tables, traps) and every WASI import are the
   Rust side's (src/lib.rs), over `wasip1` as the wasmi runner's are. */
#include <stdarg.h>
#include "wasi.c"

static Z_wasi_instance_t instance;

uintptr_t scion_wasi_stack_limit;

bool wasm_rt_is_initialized(void) {
  return true;
}

/* Function types: each distinct signature gets a number, the same one each time it is
   registered (an indirect call compares them). Kept as a list of (params, results,
   types…) words in `types`; a module with more than fits traps at start. */
#define TYPE_WORDS 65536
static uint32_t types[TYPE_WORDS];
static uint32_t types_used;

uint32_t wasm_rt_register_func_type(uint32_t params, uint32_t results, ...) {
  uint32_t sig[2 + 512];
  uint32_t n = params + results;
  if (n > 512) wasm_rt_trap(WASM_RT_TRAP_EXHAUSTION);
  sig[0] = params;
  sig[1] = results;
  va_list ap;
  va_start(ap, results);
  for (uint32_t i = 0; i < n; i++) sig[2 + i] = (uint32_t)va_arg(ap, int);
  va_end(ap);
  for (uint32_t at = 0; at < types_used; at += 2 + types[at] + types[at + 1]) {
    if (types[at] == params && types[at + 1] == results &&
        memcmp(&types[at + 2], &sig[2], n * sizeof(uint32_t)) == 0)
      return at + 1;
  }
  if (types_used + 2 + n > TYPE_WORDS) wasm_rt_trap(WASM_RT_TRAP_EXHAUSTION);
  uint32_t at = types_used;
  memcpy(&types[at], sig, (2 + n) * sizeof(uint32_t));
  types_used += 2 + n;
  /* (+1: no type is 0, which an empty table entry holds.) */
  return at + 1;
}

/* The program's memory, for the WASI imports (the Rust side). */
wasm_rt_memory_t* scion_wasi_memory(void) {
  return Z_wasiZ_memory(&instance);
}

static void body(void) {
  Z_wasi_init_module();
  Z_wasi_instantiate(&instance, NULL);
  Z_wasiZ__start(&instance);
}

/* Call `f` on the stack whose top is `top` (16-byte aligned), and come back. */
void scion_wasi_on_stack(uint8_t* top, void (*f)(void));
__asm__(
    ".section .text.scion_wasi_on_stack,\"ax\",@progbits\n"
    ".globl scion_wasi_on_stack\n"
    "scion_wasi_on_stack:\n"
    "  push %rbp\n"
    "  mov %rsp, %rbp\n"
    "  mov %rdi, %rsp\n"
    "  call *%rsi\n"
    "  mov %rbp, %rsp\n"
    "  pop %rbp\n"
    "  ret\n"
    ".text\n");

/* Run the program's `_start` on the stack [floor, top): a function whose body would
   start below floor + margin traps instead. Returns when `_start` returns (a
   `proc_exit` or a trap ends the program without returning). */
void scion_wasi_run(uint8_t* floor, uint8_t* top, uintptr_t margin) {
  scion_wasi_stack_limit = (uintptr_t)floor + margin;
  scion_wasi_on_stack(top, body);
}
