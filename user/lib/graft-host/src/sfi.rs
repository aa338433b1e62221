//! WebAssembly compiled ahead of time by software fault isolation (VINO's SFI; the
//! format and the engine are `graft::sfi`): the build translated the module to C with
//! wasm2c, compiled it with clang inside Scion's harness into one position-independent
//! image and signed it; here the signature is checked against the server's key, the image
//! put in a code slot of its own (`CodeSlot`), its relocations applied, its code made
//! read and execute only and its data read and write only, and the engine instantiates
//! the module in a linear memory of the graft's own heap. A call is the input copied in
//! and one call of the image's entry, which tells the watchdog itself that a call is
//! under way (`rt::guard::image_watch`: past `CALL_TICKS` it is started again at the
//! image's exit); a trap leaves through the image's own exit and answers its code.

use alloc::boxed::Box;
use graft::engine::{Engine, Limits};
use graft::sfi::Sfi;
use graft::{GraftFile, LoadError};

use crate::CodeSlot;

pub fn load(f: &GraftFile<'_>, sigma0: u64, limits: Limits) -> Result<Box<dyn Engine>, LoadError> {
    let code = graft::sfi::verify(f, &crate::key_or_refuse()?)?;
    let mut slot = CodeSlot::new(sigma0, code.size)?;
    let base = slot.base;
    graft::sfi::place(&code, slot.bytes(), base)?;
    let fail = |_| LoadError::Refused("the code's pages could not be protected");
    // The code: read and execute. The image's data and the rest of the slot: read and write.
    slot.take(0, code.text as u64, abi::mem::WRITE).map_err(fail)?;
    slot.take(code.text as u64, slot.size(), abi::mem::EXEC).map_err(fail)?;
    let watch = rt::guard::image_watch(crate::CALL_TICKS.load(core::sync::atomic::Ordering::Relaxed));
    // SAFETY: `place` laid the image out at `base`, in the slot the engine keeps (dropped
    // after it), its code executable and its data writable; the signature says the build
    // made it from a WebAssembly module with Scion's harness; the watch block is a static.
    let sfi = unsafe { Sfi::instantiate(base, &code, f, limits, watch) }?;
    Ok(Box::new(graft::sfi::Held::new(sfi, slot)))
}
