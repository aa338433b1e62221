//! The program's linear memory as the calls see it. Every pointer and length a program
//! passes is checked here, once: an access that does not lie wholly inside the memory
//! is `EFAULT` (lengths add in 64 bits, so `ptr + len` cannot wrap).

use crate::errno::{Errno, FAULT};

/// A program's linear memory, borrowed for one call.
pub struct Mem<'a>(pub &'a mut [u8]);

impl Mem<'_> {
    fn range(&self, ptr: u32, len: u64) -> Result<core::ops::Range<usize>, Errno> {
        let end = ptr as u64 + len;
        if end > self.0.len() as u64 {
            return Err(FAULT);
        }
        Ok(ptr as usize..end as usize)
    }

    /// `len` bytes at `ptr`.
    pub fn bytes(&self, ptr: u32, len: u32) -> Result<&[u8], Errno> {
        let r = self.range(ptr, len as u64)?;
        Ok(&self.0[r])
    }

    /// `len` bytes at `ptr`, to be written.
    pub fn bytes_mut(&mut self, ptr: u32, len: u32) -> Result<&mut [u8], Errno> {
        let r = self.range(ptr, len as u64)?;
        Ok(&mut self.0[r])
    }

    /// A string at `ptr`: UTF-8 (`EILSEQ` otherwise).
    pub fn str(&self, ptr: u32, len: u32) -> Result<&str, Errno> {
        core::str::from_utf8(self.bytes(ptr, len)?).map_err(|_| crate::errno::ILSEQ)
    }

    pub fn u32(&self, ptr: u32) -> Result<u32, Errno> {
        let b = self.bytes(ptr, 4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub fn u64(&self, ptr: u32) -> Result<u64, Errno> {
        let mut w = [0u8; 8];
        w.copy_from_slice(self.bytes(ptr, 8)?);
        Ok(u64::from_le_bytes(w))
    }

    pub fn put(&mut self, ptr: u32, data: &[u8]) -> Result<(), Errno> {
        let len = u32::try_from(data.len()).map_err(|_| FAULT)?;
        self.bytes_mut(ptr, len)?.copy_from_slice(data);
        Ok(())
    }

    pub fn put_u32(&mut self, ptr: u32, v: u32) -> Result<(), Errno> {
        self.put(ptr, &v.to_le_bytes())
    }

    pub fn put_u64(&mut self, ptr: u32, v: u64) -> Result<(), Errno> {
        self.put(ptr, &v.to_le_bytes())
    }

    /// The (pointer, length) pairs of an `iovec` array of `n` entries at `ptr`, each
    /// checked to lie in the memory.
    pub fn iovecs(&self, ptr: u32, n: u32) -> Result<alloc::vec::Vec<(u32, u32)>, Errno> {
        // 8 bytes an entry: the whole array must be there before any is read (a count
        // of 2^32 − 1 is refused here, not walked).
        self.range(ptr, n as u64 * 8)?;
        let mut out = alloc::vec::Vec::with_capacity(n as usize);
        for i in 0..n {
            let (p, l) = (self.u32(ptr + i * 8)?, self.u32(ptr + i * 8 + 4)?);
            self.range(p, l as u64)?;
            out.push((p, l));
        }
        Ok(out)
    }
}
