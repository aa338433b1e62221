//! Memory shared with another program (a BAIO segment's area, a server's view of its
//! clients' areas, DMA memory): one bounds-checked type, so the raw pointer work is
//! done here once. Words are read and written volatile (the other side changes them);
//! an offset outside the area is a bug in the caller and panics rather than touch
//! memory the area does not cover.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Area {
    base: u64,
    len: u64,
}

impl Area {
    /// # Safety
    /// `base .. base + len` must be mapped read-write in this program for as long as
    /// the `Area` (or a copy of it) is used, and must not be Rust-owned memory that
    /// other code holds references into.
    pub const unsafe fn new(base: u64, len: u64) -> Area {
        Area { base, len }
    }

    pub const fn base(&self) -> u64 {
        self.base
    }

    pub const fn len(&self) -> u64 {
        self.len
    }

    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn check(&self, off: u64, len: u64) -> u64 {
        match off.checked_add(len) {
            Some(end) if end <= self.len => self.base + off,
            _ => panic!("shared area: {:#x}+{:#x} outside its {:#x} bytes", off, len, self.len),
        }
    }

    /// The word at `off` (8-byte aligned).
    pub fn read(&self, off: u64) -> u64 {
        assert!(off.is_multiple_of(8), "shared area: unaligned word");
        let a = self.check(off, 8);
        // SAFETY: in bounds and aligned (checked); mapped by `new`'s contract.
        unsafe { core::ptr::read_volatile(a as *const u64) }
    }

    /// Write the word at `off` (8-byte aligned).
    pub fn write(&self, off: u64, v: u64) {
        assert!(off.is_multiple_of(8), "shared area: unaligned word");
        let a = self.check(off, 8);
        // SAFETY: as in `read`; the area is mapped writable.
        unsafe { core::ptr::write_volatile(a as *mut u64, v) }
    }

    /// `len` bytes at `off`. The other side may write them concurrently only where the
    /// protocol lets it (an operation on them pending), which the caller waits out.
    #[allow(clippy::mut_from_ref)]
    pub fn bytes(&self, off: u64, len: u64) -> &mut [u8] {
        let a = self.check(off, len);
        // SAFETY: in bounds (checked), mapped read-write by `new`'s contract; not Rust-owned
        // memory, so no other reference aliases it except through this type.
        unsafe { core::slice::from_raw_parts_mut(a as *mut u8, len as usize) }
    }

    /// Zero `len` bytes at `off`.
    pub fn zero(&self, off: u64, len: u64) {
        self.bytes(off, len).fill(0);
    }

    /// Copy `len` bytes from `from` at `from_off` to this area at `off`.
    pub fn copy_from(&self, off: u64, from: &Area, from_off: u64, len: u64) {
        let src = from.check(from_off, len);
        let dst = self.check(off, len);
        // SAFETY: both ranges in bounds (checked) and mapped; `copy` allows overlap.
        unsafe { core::ptr::copy(src as *const u8, dst as *mut u8, len as usize) }
    }
}
