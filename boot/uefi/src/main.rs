//! Scion's UEFI loader (`\EFI\BOOT\BOOTX64.EFI` on the EFI system partition that
//! `cargo xtask image` writes). It reads `\scion\kernel` (the kernel's ELF) and
//! `\scion\boot.img` (the boot image: every program and root's manifest) and, if
//! present, `\scion\cmdline` from the partition it was loaded from; loads the kernel's
//! segments at their physical addresses; takes the ACPI RSDP from the firmware's
//! configuration table and the framebuffer from the Graphics Output Protocol; writes
//! the boot information (`crates/bootinfo`) below 4 GiB; exits boot services, turns the
//! firmware's memory map into the boot information's, and jumps to the kernel's 64-bit
//! entry (named by the kernel's `Scion` ELF note) with the boot information's address
//! in `rdi`, on the firmware's identity-mapped page tables with interrupts off.
//!
//! Before it jumps, it moves the 64-bit BARs the firmware put above 4 GiB on bus 0 into
//! the 32-bit window Scion's drivers reach (`pci`).
//!
//! Every failure before boot services end is a line on the firmware's console and an
//! error status back to the firmware (which then tries its next boot option).
#![no_std]
#![no_main]

extern crate alloc;

mod pci;

use alloc::vec::Vec;
use bootinfo::{Framebuffer, Info, PixelFormat, Region};
use uefi::boot::{self, AllocateType, MemoryType};
use uefi::mem::memory_map::MemoryMap;
use uefi::prelude::*;
use uefi::proto::console::gop::{self, GraphicsOutput};
use uefi::table::cfg::ConfigTableEntry;
use uefi::{cstr16, println};

const PAGE: u64 = 4096;
/// The boot information and the boot image stay below this (the kernel's boot stub
/// keeps the boot information's address in 32 bits).
const BELOW_4G: u64 = 0xffff_f000;
/// Room for memory-map entries the firmware adds between our look at its map and the
/// end of boot services.
const SPARE_ENTRIES: usize = 64;

#[entry]
fn main() -> Status {
    if uefi::helpers::init().is_err() {
        return Status::ABORTED;
    }
    match load() {
        Ok(never) => match never {},
        Err(e) => {
            println!("scion-uefi: {}", e);
            // Time to read it on a screen before the firmware moves on.
            boot::stall(core::time::Duration::from_secs(10));
            Status::LOAD_ERROR
        }
    }
}

/// A reason to give up, for the console.
type Failure = alloc::string::String;

fn fail(what: &str, e: impl core::fmt::Debug) -> Failure {
    alloc::format!("{what}: {e:?}")
}

enum Never {}

fn load() -> Result<Never, Failure> {
    println!("scion-uefi: Scion's UEFI loader");
    let mut fs: uefi::fs::FileSystem = boot::get_image_file_system(boot::image_handle())
        .map_err(|e| fail("no file system on the boot partition", e))?
        .into();
    let kernel = fs.read(cstr16!("\\scion\\kernel")).map_err(|e| fail("cannot read \\scion\\kernel", e))?;
    let image = fs.read(cstr16!("\\scion\\boot.img")).map_err(|e| fail("cannot read \\scion\\boot.img", e))?;
    let cmdline = fs.read(cstr16!("\\scion\\cmdline")).unwrap_or_default();
    let cmdline: Vec<u8> = cmdline.iter().copied().take_while(|&c| c != b'\n' && c != 0).collect();
    drop(fs);

    let k = bootinfo::kernel_image(&kernel).map_err(|e| fail("\\scion\\kernel is not a Scion kernel", e))?;
    for l in k.loads() {
        let first = l.paddr & !(PAGE - 1);
        let pages = (l.paddr + l.memsz).div_ceil(PAGE) - first / PAGE;
        let at = boot::allocate_pages(AllocateType::Address(first), MemoryType::LOADER_DATA, pages as usize).map_err(
            |e| {
                alloc::format!(
                    "the kernel goes at {:#x}..{:#x}, which the firmware uses ({:?})",
                    first,
                    first + pages * PAGE,
                    e.status()
                )
            },
        )?;
        // SAFETY: `pages` pages at `first` were just allocated for the kernel; the
        // firmware's page tables map memory identity, so the address is the pointer.
        let dst = unsafe { core::slice::from_raw_parts_mut(at.as_ptr(), (pages * PAGE) as usize) };
        let off = (l.paddr - first) as usize;
        dst.fill(0);
        dst[off..off + l.filesz as usize].copy_from_slice(&kernel[l.offset as usize..(l.offset + l.filesz) as usize]);
    }

    let bootfs = below_4g(image.len()).map_err(|e| fail("no memory below 4 GiB for the boot image", e))?;
    bootfs[..image.len()].copy_from_slice(&image);
    let bootfs_addr = bootfs.as_ptr() as u64;

    let rsdp = uefi::system::with_config_table(|t| {
        let find = |g| t.iter().find(|e| e.guid == g).map(|e| e.address as u64);
        find(ConfigTableEntry::ACPI2_GUID).or_else(|| find(ConfigTableEntry::ACPI_GUID)).unwrap_or(0)
    });
    let framebuffer = framebuffer();
    println!(
        "scion-uefi: kernel {} KiB, boot image {} KiB at {:#x}, RSDP {:#x}, framebuffer {}",
        kernel.len() >> 10,
        image.len() >> 10,
        bootfs_addr,
        rsdp,
        match framebuffer {
            Some(f) => alloc::format!("{}x{} at {:#x}", f.width, f.height, f.addr),
            None => "none".into(),
        }
    );

    // Ranges the firmware keeps for devices and itself: no BAR is moved onto them.
    let reserved: Vec<(u64, u64)> = boot::memory_map(MemoryType::LOADER_DATA)
        .map_err(|e| fail("no memory map", e))?
        .entries()
        .filter(|d| {
            matches!(d.ty, MemoryType::MMIO | MemoryType::MMIO_PORT_SPACE | MemoryType::RESERVED)
                || d.ty.0 >= MemoryType::MAX.0
        })
        .map(|d| (d.phys_start, d.phys_start.saturating_add(d.page_count * PAGE)))
        .collect();
    let moves = pci::plan(&reserved);
    for m in &moves {
        println!(
            "scion-uefi: PCI 00:{:02x}.{} BAR{} ({} KiB) moves from {:#x} to {:#x}, below 4 GiB",
            m.dev,
            m.func,
            m.bar,
            m.size >> 10,
            m.from,
            m.to
        );
    }

    // The memory map's size now, with room for what changes until boot services end.
    let entries = boot::memory_map(MemoryType::LOADER_DATA).map_err(|e| fail("no memory map", e))?.entries().count()
        + SPARE_ENTRIES;
    let block = below_4g(bootinfo::len_for(entries, cmdline.len()))
        .map_err(|e| fail("no memory for the boot information", e))?;
    let block_addr = block.as_ptr() as u64;
    let mut raw: Vec<Region> = Vec::with_capacity(entries);
    let mut merged: Vec<Region> = alloc::vec![Region { addr: 0, len: 0, kind: 0 }; entries];
    println!("scion-uefi: starting the kernel at {:#x}", k.entry64);

    // SAFETY: nothing of the firmware's boot services is used after this: no allocation
    // (the vectors above have their room), no console, no protocol.
    let map = unsafe { boot::exit_boot_services(None) };
    pci::apply(&moves);
    for d in map.entries().take(entries) {
        let kind = match d.ty {
            MemoryType::CONVENTIONAL
            | MemoryType::BOOT_SERVICES_CODE
            | MemoryType::BOOT_SERVICES_DATA
            | MemoryType::LOADER_CODE
            | MemoryType::LOADER_DATA => bootinfo::RAM,
            MemoryType::ACPI_RECLAIM => bootinfo::ACPI_RECLAIM,
            MemoryType::ACPI_NON_VOLATILE => bootinfo::ACPI_NVS,
            _ => bootinfo::RESERVED,
        };
        raw.push(Region { addr: d.phys_start, len: d.page_count * PAGE, kind });
    }
    raw.sort_unstable_by_key(|r| r.addr);
    let mut n = 0;
    for r in &raw {
        match bootinfo::push_region(&mut merged, n, *r) {
            Some(m) => n = m,
            None => break,
        }
    }
    let info = Info { rsdp, bootfs_addr, bootfs_len: image.len() as u64, cmdline: &cmdline, memmap: &[], framebuffer };
    if bootinfo::write(block, &info, &merged[..n]).is_err() {
        // Cannot happen (the block was sized for `entries`), and nothing can be said
        // any more: stop here rather than start a kernel without its information.
        halt();
    }
    // SAFETY: the kernel's segments are loaded at their physical addresses, and its
    // 64-bit entry (its note) expects exactly this: long mode on identity-mapped page
    // tables, interrupts off, the boot information's address (below 4 GiB) in rdi. It
    // never returns.
    unsafe {
        core::arch::asm!("cli", "jmp {entry}", entry = in(reg) k.entry64, in("rdi") block_addr, options(noreturn));
    }
}

/// `len` bytes (whole pages) of loader memory below 4 GiB.
fn below_4g(len: usize) -> uefi::Result<&'static mut [u8]> {
    let pages = (len as u64).div_ceil(PAGE).max(1) as usize;
    let p = boot::allocate_pages(AllocateType::MaxAddress(BELOW_4G), MemoryType::LOADER_DATA, pages)?;
    // SAFETY: `pages` pages were just allocated for us alone; identity mapped.
    Ok(unsafe { core::slice::from_raw_parts_mut(p.as_ptr(), pages * PAGE as usize) })
}

/// The Graphics Output Protocol's framebuffer, if it has one of 32-bit RGB or BGR pixels.
fn framebuffer() -> Option<Framebuffer> {
    let h = boot::get_handle_for_protocol::<GraphicsOutput>().ok()?;
    let mut g = boot::open_protocol_exclusive::<GraphicsOutput>(h).ok()?;
    let mode = g.current_mode_info();
    let format = match mode.pixel_format() {
        gop::PixelFormat::Rgb => PixelFormat::Rgbx,
        gop::PixelFormat::Bgr => PixelFormat::Bgrx,
        _ => return None,
    };
    let (width, height) = mode.resolution();
    let stride = mode.stride();
    let mut fb = g.frame_buffer();
    Some(Framebuffer {
        addr: fb.as_mut_ptr() as u64,
        len: fb.size() as u64,
        width: width as u32,
        height: height as u32,
        stride: stride as u32,
        format,
    })
}

fn halt() -> ! {
    loop {
        // SAFETY: stops this CPU until an interrupt, which are off: for good.
        unsafe { core::arch::asm!("cli; hlt", options(nomem, nostack)) };
    }
}
