//! The two ways in, both ending in `kstart` in the higher half:
//!
//! - **PVH** (`cargo xtask run`): QEMU loads the ELF at its physical addresses and jumps
//!   to the address in the Xen `PHYS32_ENTRY` note in 32-bit protected mode, paging off,
//!   with `ebx` = physical address of the `hvm_start_info`.
//! - **UEFI** (`cargo xtask image`, `run --uefi`): Scion's loader (`boot/uefi`) loads the
//!   ELF at its physical addresses and jumps to the address in the `Scion` note
//!   (`bootinfo::NOTE_ENTRY64`) in long mode on the firmware's identity-mapped page
//!   tables, interrupts off, `rdi` = physical address (below 4 GiB) of the boot
//!   information (`crates/bootinfo`).
//!
//! Both stubs build the same boot page tables (identity map of the first 4 GiB, the
//! same 4 GiB again at the direct-map base, and the kernel image at -2 GiB; one macro,
//! assembled once for each mode), load them with long mode on, and jump to `kstart`
//! with the boot structure's address; `mem::init` tells the two kinds apart.

use core::arch::global_asm;
use core::sync::atomic::{AtomicU64, Ordering};

global_asm!(
    r#"
    /* Zero .bss, then fill the boot page tables (the same instructions in 32-bit and
       64-bit mode: 32-bit registers, addresses below 4 GiB). */
    .macro BUILD_PAGE_TABLES
    /* Zero .bss (by physical address). */
    mov edi, offset __bss_phys_start
    mov ecx, offset __bss_phys_end
    sub ecx, edi
    shr ecx, 2
    xor eax, eax
    rep stosd

    /* 2048 2-MiB pages: physical 0..4 GiB; the top GiB (MMIO) uncached. */
    mov edi, offset boot_pd
    xor ecx, ecx
1:
    mov eax, ecx
    shl eax, 21
    or eax, 0x83
    cmp ecx, 1536
    jb 2f
    or eax, 0x18
2:
    mov [edi + ecx*8], eax
    mov dword ptr [edi + ecx*8 + 4], 0
    inc ecx
    cmp ecx, 2048
    jb 1b

    /* PDPT_LOW[0..4] -> the four page directories */
    mov edi, offset boot_pdpt_low
    mov eax, offset boot_pd
    or eax, 3
    mov [edi], eax
    add eax, 4096
    mov [edi + 8], eax
    add eax, 4096
    mov [edi + 16], eax
    add eax, 4096
    mov [edi + 24], eax

    /* PDPT_HIGH[510] -> first page directory (kernel at -2 GiB = physical 0) */
    mov edi, offset boot_pdpt_high
    mov eax, offset boot_pd
    or eax, 3
    mov [edi + 510*8], eax

    /* PML4[0] and PML4[256] -> PDPT_LOW, PML4[511] -> PDPT_HIGH */
    mov edi, offset boot_pml4
    mov eax, offset boot_pdpt_low
    or eax, 3
    mov [edi], eax
    mov [edi + 256*8], eax
    mov eax, offset boot_pdpt_high
    or eax, 3
    mov [edi + 511*8], eax

    .endm

    .section .note.Xen, "a"
    .p2align 2
    .long 4
    .long 8
    .long 18
    .asciz "Xen"
    .quad pvh_start32

    /* The UEFI loader's entry (bootinfo::NOTE_ENTRY64, name "Scion"). */
    .p2align 2
    .long 6
    .long 8
    .long 0x5301
    .asciz "Scion"
    .p2align 2
    .quad uefi_start64

    .section .boot.text, "ax"
    .code32
    .global pvh_start32
pvh_start32:
    cli
    cld
    mov [boot_info_ptr], ebx
    mov esp, offset boot_stack32_top

    BUILD_PAGE_TABLES

    /* CR4.PAE */
    mov eax, cr4
    or eax, 0x20
    mov cr4, eax
    mov eax, offset boot_pml4
    mov cr3, eax

    /* EFER: LME | SCE, and NXE when the CPU has NX */
    mov eax, 0x80000001
    cpuid
    xor esi, esi
    test edx, 0x100000
    jz 3f
    mov esi, 0x800
    mov dword ptr [boot_nx], 1
3:
    mov ecx, 0xC0000080
    rdmsr
    or eax, 0x101
    or eax, esi
    wrmsr

    /* CR0: PG | WP | PE */
    mov eax, cr0
    or eax, 0x80010001
    mov cr0, eax

    lgdt [boot_gdtr]
    /* jmp far 0x08:boot_long (ptr16:32), spelled out for the assembler */
    .byte 0xEA
    .long boot_long
    .word 0x08

    .code64
boot_long:
    mov ax, 0x10
    mov ds, ax
    mov es, ax
    mov ss, ax
    xor ax, ax
    mov fs, ax
    mov gs, ax
    movabs rsp, offset boot_kstack_top
    mov edi, dword ptr [boot_info_ptr]
    movabs rax, offset kstart
    call rax
4:
    hlt
    jmp 4b

    /* The UEFI entry: long mode, the firmware's identity map, rdi = boot information. */
    .global uefi_start64
uefi_start64:
    cli
    cld
    mov dword ptr [boot_info_ptr], edi
    mov esp, offset boot_stack32_top

    BUILD_PAGE_TABLES

    /* EFER: SCE, and NXE when the CPU has NX (LME and LMA are on already). */
    mov eax, 0x80000001
    cpuid
    xor esi, esi
    test edx, 0x100000
    jz 5f
    mov esi, 0x800
    mov dword ptr [boot_nx], 1
5:
    mov ecx, 0xC0000080
    rdmsr
    or eax, 0x1
    or eax, esi
    wrmsr
    /* CR4: PAE (on in long mode) and nothing the kernel does not set itself but PGE,
       which the firmware may have on: off, so that the switch flushes every entry. */
    mov rax, cr4
    and eax, 0xffffff7f
    mov cr4, rax
    mov eax, offset boot_pml4
    mov cr3, rax
    mov rax, cr0
    or eax, 0x10000
    mov cr0, rax
    lgdt [boot_gdtr64]
    /* Reload CS (0x08, the boot GDT's 64-bit code) with a far return. */
    push 0x08
    mov eax, offset boot_long
    push rax
    retfq

    .section .boot.data, "aw"
    .p2align 12
    .global boot_pml4
boot_pml4:       .zero 4096
    .global boot_pdpt_low
boot_pdpt_low:   .zero 4096
boot_pdpt_high:  .zero 4096
boot_pd:         .zero 4096 * 4
boot_stack32:    .zero 1024
boot_stack32_top:
    .p2align 3
boot_gdt:
    .quad 0
    .quad 0x00AF9A000000FFFF
    .quad 0x00CF92000000FFFF
boot_gdtr:
    .word 23
    .long boot_gdt
    .p2align 3
boot_gdtr64:
    .word 23
    .quad boot_gdt
    .global boot_info_ptr
boot_info_ptr: .long 0
    .global boot_nx
boot_nx: .long 0

    .section .bss.boot_kstack, "aw", @nobits
    .p2align 12
boot_kstack: .zero 65536
    .global boot_kstack_top
boot_kstack_top:
    .text
"#
);

extern "C" {
    static boot_pml4: u8;
    static boot_pdpt_low: u8;
    static boot_nx: u32;
}

/// Where the page tables map physical memory (the upper half every address space
/// shares): the boot stub maps the first 4 GiB, `extend_direct_map` the RAM above.
pub const DIRECT_MAP: u64 = 0xffff_8000_0000_0000;
/// The boot stub's direct map: physical memory below 4 GiB.
pub const BOOT_DIRECT_MAP: u64 = 4 << 30;
/// The direct map never reaches beyond this (RAM above it is not used).
pub const DIRECT_MAP_MAX: u64 = 64 << 30;
static DIRECT_MAP_END: AtomicU64 = AtomicU64::new(BOOT_DIRECT_MAP);

/// The kernel's address of physical address `p` (below `direct_map_end()`).
pub fn phys_to_virt(p: u64) -> *mut u8 {
    (DIRECT_MAP + p) as *mut u8
}

/// Physical memory below this is in the direct map.
pub fn direct_map_end() -> u64 {
    DIRECT_MAP_END.load(Ordering::Relaxed)
}

/// Map physical memory from 4 GiB up to `end` (at most `DIRECT_MAP_MAX`) into the
/// direct map, with 1 GiB pages when the CPU has them (without, RAM above 4 GiB stays
/// out of reach). Returns where the direct map ends now.
pub fn extend_direct_map(end: u64) -> u64 {
    let gib_pages = core::arch::x86_64::__cpuid(0x8000_0001).edx & (1 << 26) != 0;
    let end = end.min(DIRECT_MAP_MAX).div_ceil(1 << 30) << 30;
    if end <= direct_map_end() || !gib_pages {
        return direct_map_end();
    }
    // The direct map's PDPT (PML4 entry 256, shared by every address space; its first
    // four entries are the boot stub's page directories).
    let pdpt = phys_to_virt(core::ptr::addr_of!(boot_pdpt_low) as u64) as *mut u64;
    for g in (direct_map_end() >> 30)..(end >> 30) {
        // SAFETY: entry g (4..64) of the direct map's PDPT, which nothing maps yet; a
        // 1 GiB page of physical memory, present, writable, kernel only, like the rest
        // of the direct map.
        unsafe { pdpt.add(g as usize).write_volatile((g << 30) | 0x83) };
    }
    DIRECT_MAP_END.store(end, Ordering::Relaxed);
    end
}

/// Map the device memory `addr..addr + len` (beyond the direct map's RAM, below 512 GiB)
/// at its direct-map address, uncached, in 1 GiB pages: the firmware's framebuffer when
/// it lies above RAM. False when it cannot be (no 1 GiB pages, or too high).
pub fn map_device_gib(addr: u64, len: u64) -> bool {
    let gib_pages = core::arch::x86_64::__cpuid(0x8000_0001).edx & (1 << 26) != 0;
    let end = addr.saturating_add(len);
    if !gib_pages || end > 512 << 30 || len == 0 {
        return false;
    }
    let pdpt = phys_to_virt(core::ptr::addr_of!(boot_pdpt_low) as u64) as *mut u64;
    for g in (addr >> 30)..end.div_ceil(1 << 30) {
        if g < direct_map_end() >> 30 {
            continue;
        }
        // SAFETY: entry g of the direct map's PDPT, beyond the RAM it maps (which never
        // grows after boot); a 1 GiB page of device memory, present, writable, kernel
        // only, cache disabled (PCD | PWT).
        unsafe { pdpt.add(g as usize).write_volatile((g << 30) | 0x83 | 0x18) };
    }
    true
}

/// Point entry `index` (in the kernel half, not yet used) of the boot PML4 at the page
/// directory pointer table `pdpt` (a zeroed frame). Only before the first task is made:
/// a task copies the kernel half of the boot PML4 when it is created, and shares
/// everything below it from then on.
pub fn install_kernel_pdpt(index: usize, pdpt: u64) {
    assert!((256..511).contains(&index), "PML4 entry {} is not free kernel address space", index);
    let pml4 = phys_to_virt(boot_pml4_phys()) as *mut u64;
    // SAFETY: entry `index` of the boot PML4 (in the direct map), checked to be in the
    // kernel half and to be none of the entries the boot stub fills (256: the direct map,
    // 511: the kernel image); present and writable, kernel only.
    unsafe {
        assert_eq!(pml4.add(index).read_volatile(), 0, "PML4 entry {} is in use", index);
        pml4.add(index).write_volatile(pdpt | 0x3);
    }
}

/// Physical address of the boot PML4, whose upper half every address space shares.
pub fn boot_pml4_phys() -> u64 {
    // Only the address of the linker-provided symbol is taken; it lies in the
    // identity-mapped .boot section, so its link address is its physical address.
    core::ptr::addr_of!(boot_pml4) as u64
}

/// Whether the boot stub enabled EFER.NXE (the CPU has the NX bit).
pub fn nx_enabled() -> bool {
    // SAFETY: written once by the boot stub before any Rust code runs, read-only afterwards;
    // the .boot section stays identity mapped in the kernel's own page table, and the
    // symbol's address is a low identity-mapped address that we read through the direct map.
    unsafe { core::ptr::read_volatile(phys_to_virt(core::ptr::addr_of!(boot_nx) as u64) as *const u32) != 0 }
}
