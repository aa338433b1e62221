/* Scion's harness around one WebAssembly graft translated to C by wasm2c (`graft.h`,
   made with `wasm2c -n graft`): the runtime the generated code needs and the graft's two
   entries. Compiled by xtask with the generated code into one position-independent
   image (no floating point, no SSE, no red zone) that calls nothing outside itself; its
   writable data (below) lies in pages of its own after the code, which the server maps
   read-write and not executable, the code read and execute only.

   The server owns the graft's linear memory and hands it over at `scion_sfi_init`: its
   place and the bytes reserved for it (the graft's memory limit). Every access is
   checked against the memory's size (wasm2c's bounds-check mode), and `memory.grow`
   grows it within the reservation. A trap leaves the call at once (a non-local exit to
   the entry, which answers the trap's code in rdx); the server's watchdog stops a call that runs too long (the entries tell
   it, in a block of the server's, which call is under way and where it exits).

   The generated file is part of this one (one translation unit), so that the compiler
   sees the module's instance as this file's static: its memory's place and size are
   then loads it may hoist out of a loop. */
#include <stdarg.h>
#include "graft.c"

/* What the server and the image share (the server's `graft::sfi::Ctl`). */
struct scion_sfi_ctl {
  uint64_t mem_base; /* in: where the linear memory lies */
  uint64_t mem_cap;  /* in: bytes reserved for it */
  uint64_t mem_size; /* out (init): its size */
  uint64_t input_at; /* out (init): graft_input() */
  uint64_t state_at; /* out (init): graft_state() */
  uint64_t watch;    /* in (init): the server's watch block (rt::guard::ImageWatch) */
};

/* What an entry answers (rax, rdx): the graft's answer, and in `how` its trap's code
   (wasm_rt_trap_t; 0: none) or, for a call that returned, SCION_SFI_WROTE_BIT if it
   stored into linear memory. */
struct scion_sfi_answer {
  uint64_t value, how;
};
#define SCION_SFI_WROTE_BIT (1ull << 32)

/* `wasm_rt_call_stack_depth` and `scion_sfi_wrote` are this file's statics (wasm-rt.h):
   the compiler sees every use of them. */
static Z_graft_instance_t instance;
static uint8_t* mem_base;
static uint64_t mem_cap;
/* Where the input goes: graft_input(), in the memory. */
static uint8_t* input;
/* Where the call under way began: the registers its caller keeps and its stack pointer
   (at the return address). A trap goes back there. */
uint64_t scion_sfi_regs[7];
/* The server's watch block (`rt::guard::ImageWatch`: active, call number, exit, the
   caller's stack pointer): the entries fill it in, so that its watchdog can stop a
   call that runs too long by starting the thread again at `scion_sfi_exit`. */
struct scion_sfi_watch {
  volatile uint64_t active, seq, exit, sp;
};
struct scion_sfi_watch* scion_sfi_watch;

/* The entries note where the call began (the registers the caller keeps, stored, not
   pushed: a call that returns has kept them itself), then, in the server's watch
   block, the exit, the stack pointer (whose thread the call is on), a new call number
   and that a call is under way, and go on to the C entry, which returns to the caller
   directly (clearing `active` first);
   `scion_sfi_exit` (a trap, or the watchdog: `rdi` = the trap's code) clears `active`,
   takes the registers back and returns (0, the trap's code) from the entry. */
__asm__(
    ".pushsection .text.scion_sfi_entry, \"ax\"\n"
    ".globl scion_sfi_init\n .hidden scion_sfi_init\n"
    ".globl scion_sfi_run\n .hidden scion_sfi_run\n"
    ".globl scion_sfi_exit\n .hidden scion_sfi_exit\n"
    ".macro scion_sfi_note\n"
    "  mov %rbx, scion_sfi_regs(%rip)\n mov %rbp, scion_sfi_regs+8(%rip)\n"
    "  mov %r12, scion_sfi_regs+16(%rip)\n mov %r13, scion_sfi_regs+24(%rip)\n"
    "  mov %r14, scion_sfi_regs+32(%rip)\n mov %r15, scion_sfi_regs+40(%rip)\n"
    "  mov %rsp, scion_sfi_regs+48(%rip)\n"
    "  mov scion_sfi_watch(%rip), %rcx\n lea scion_sfi_exit(%rip), %rax\n mov %rax, 16(%rcx)\n"
    "  mov %rsp, 24(%rcx)\n addq $1, 8(%rcx)\n movq $1, (%rcx)\n"
    ".endm\n"
    "scion_sfi_init:\n" /* rdi = ctl */
    "  mov 40(%rdi), %rax\n mov %rax, scion_sfi_watch(%rip)\n"
    "  scion_sfi_note\n"
    "  jmp scion_sfi_start\n"
    "scion_sfi_run:\n" /* rdi = input length, rsi = input */
    "  scion_sfi_note\n"
    "  jmp scion_sfi_call\n"
    "scion_sfi_exit:\n" /* rdi = trap code */
    "  mov scion_sfi_regs+48(%rip), %rsp\n"
    "  mov %rdi, %rdx\n"
    "  mov scion_sfi_watch(%rip), %rcx\n movq $0, (%rcx)\n"
    "  mov scion_sfi_regs(%rip), %rbx\n mov scion_sfi_regs+8(%rip), %rbp\n"
    "  mov scion_sfi_regs+16(%rip), %r12\n mov scion_sfi_regs+24(%rip), %r13\n"
    "  mov scion_sfi_regs+32(%rip), %r14\n mov scion_sfi_regs+40(%rip), %r15\n"
    "  cld\n xor %eax, %eax\n ret\n"
    ".popsection\n");

__attribute__((noreturn)) void scion_sfi_exit(uint64_t code);

bool wasm_rt_is_initialized(void) { return true; }

__attribute__((noreturn)) void wasm_rt_trap(wasm_rt_trap_t code) {
  wasm_rt_call_stack_depth = 0;
  scion_sfi_exit(code == WASM_RT_TRAP_NONE ? WASM_RT_TRAP_UNREACHABLE : code);
}

/* A signature's number (equal signatures, equal numbers): only call_indirect compares
   them, and a module with a table is refused. */
uint32_t wasm_rt_register_func_type(uint32_t params, uint32_t results, ...) {
  uint32_t h = 2166136261u ^ (params << 8) ^ results;
  va_list ap;
  va_start(ap, results);
  for (uint32_t i = 0; i < params + results; i++) h = (h ^ (uint32_t)va_arg(ap, int)) * 16777619u;
  va_end(ap);
  return h;
}

#define PAGE 65536ull

void wasm_rt_allocate_memory(wasm_rt_memory_t* m, uint32_t initial, uint32_t max) {
  uint64_t bytes = initial * PAGE, cap = mem_cap / PAGE;
  if (bytes > mem_cap) wasm_rt_trap(WASM_RT_TRAP_OOB);
  memset(mem_base, 0, bytes);
  m->data = mem_base;
  m->pages = initial;
  m->max_pages = max < cap ? max : cap;
  m->size = bytes;
}

uint32_t wasm_rt_grow_memory(wasm_rt_memory_t* m, uint32_t delta) {
  uint64_t old = m->pages, pages = old + delta;
  if (pages > m->max_pages) return UINT32_MAX;
  memset(m->data + m->size, 0, delta * PAGE);
  m->pages = pages;
  m->size = pages * PAGE;
  return (uint32_t)old;
}

void wasm_rt_free_memory(wasm_rt_memory_t* m) { (void)m; }

/* Instantiate the module in the memory the server hands over: its globals, its memory
   (zeroed, then its data segments), where it keeps the input and its state. */
__attribute__((used)) struct scion_sfi_answer scion_sfi_start(struct scion_sfi_ctl* c) {
  mem_base = (uint8_t*)c->mem_base;
  mem_cap = c->mem_cap;
  wasm_rt_call_stack_depth = 0;
  Z_graft_init_module();
  Z_graft_instantiate(&instance);
  c->input_at = Z_graftZ_graft_input(&instance);
  input = mem_base + c->input_at;
  c->state_at = Z_graftZ_graft_state(&instance);
  c->mem_size = instance.w2c_memory.size;
  scion_sfi_watch->active = 0;
  return (struct scion_sfi_answer){0, 0};
}

/* One call: the `len` bytes of input at `from` (the server's, at most the point's
   input, which the server checked against the input buffer at init) copied to
   graft_input(); the answer and whether the call stored into linear memory (or, by
   the exit, 0 and the trap's code). (A call left by the exit leaves the call depth
   behind: each call starts it from 0.) */
__attribute__((used, flatten)) struct scion_sfi_answer scion_sfi_call(uint64_t len, const uint8_t* from) {
  uint8_t* to = input;
  uint64_t words = len >> 3, bytes = len & 7;
  __asm__ volatile("rep movsq" : "+D"(to), "+S"(from), "+c"(words) : : "memory");
  if (bytes) __asm__ volatile("rep movsb" : "+D"(to), "+S"(from), "+c"(bytes) : : "memory");
  wasm_rt_call_stack_depth = 0;
  scion_sfi_wrote = 0;
  uint64_t r = w2c_graft_run(&instance, (uint32_t)len);
  scion_sfi_watch->active = 0;
  return (struct scion_sfi_answer){r, scion_sfi_wrote ? SCION_SFI_WROTE_BIT : 0};
}

/* What a freestanding C program must provide; string instructions, so that the
   compiler cannot turn them into calls to themselves. */
void* memcpy(void* d, const void* s, size_t n) {
  void* r = d;
  size_t q = n >> 3;
  __asm__ volatile("rep movsq" : "+D"(d), "+S"(s), "+c"(q) : : "memory");
  n &= 7;
  __asm__ volatile("rep movsb" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
  return r;
}

void* memmove(void* d, const void* s, size_t n) {
  if ((uintptr_t)d - (uintptr_t)s >= n) return memcpy(d, s, n);
  /* Overlapping, destination above: backwards. */
  unsigned char* dp = (unsigned char*)d + n - 1;
  const unsigned char* sp = (const unsigned char*)s + n - 1;
  __asm__ volatile("std\n rep movsb\n cld" : "+D"(dp), "+S"(sp), "+c"(n) : : "memory");
  return d;
}

void* memset(void* d, int c, size_t n) {
  void* r = d;
  uint64_t q = n >> 3, v = 0x0101010101010101ull * (unsigned char)c;
  __asm__ volatile("rep stosq" : "+D"(d), "+c"(q) : "a"(v) : "memory");
  n &= 7;
  __asm__ volatile("rep stosb" : "+D"(d), "+c"(n) : "a"(v) : "memory");
  return r;
}

int memcmp(const void* a, const void* b, size_t n) {
  const unsigned char *x = a, *y = b;
  for (size_t i = 0; i < n; i++) {
    if (x[i] != y[i]) return x[i] - y[i];
  }
  return 0;
}
