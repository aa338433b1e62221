//! Names and supervision: a server found by name through root; a name the manifest
//! does not grant is refused; when the server crashes, a caller waiting for it gets
//! an error (not a hang), root restarts it (the manifest says `restart`), and a new
//! lookup reaches the new instance.
#![no_std]
#![no_main]

use abi::Error;
use echo_api as echo;
use rt::env;
use rt::ipc::{self, Msg, FOREVER};
use tests::{raw_request, Checks};

rt::entry!(main);

fn main() -> i32 {
    let mut c = Checks::new();
    let e = rt::alloc_slot();
    c.eq(env::lookup("echo", e), Ok(()), "find the echo server by name");
    let mut m = Msg::new(echo::ECHO, &[7]);
    c.eq(ipc::call(e, &mut m, FOREVER), Ok(()), "call it");
    c.eq(m.word(1), 7, "it answers with our word");
    c.check(m.word(2) != 0, "with our id as the badge root minted for us");
    c.eq(env::lookup("console", rt::alloc_slot()), Err(Error::NoRights), "a name the manifest does not grant");
    c.eq(env::lookup("nothing", rt::alloc_slot()), Err(Error::NoRights), "an unknown name");
    c.eq(env::io(0x3f8, 3), Err(Error::NoRights), "I/O ports the manifest does not grant");
    c.eq(env::irq(4, rt::alloc_slot()), Err(Error::NoRights), "an IRQ the manifest does not grant");
    c.eq(rt::sys::irq_attach(rt::alloc_slot(), 0), Err(Error::InvalidCap), "attaching to an IRQ without a capability");
    c.eq(
        rt::sys::irq_create(abi::cap::SELF_TASK, 4, rt::alloc_slot()),
        Err(Error::WrongType),
        "making an IRQ capability without IRQ control",
    );

    // Requests no client stub sends, to echo and to root.
    c.eq(raw_request(e, 0xee, &[], None), Err(Error::Unsupported), "echo: an unknown label");
    c.eq(raw_request(e, echo::FORWARD, &[e], None), Err(Error::Malformed), "echo: FORWARD with one word of two");
    c.eq(raw_request(abi::cap::PARENT, 0xee, &[], None), Err(Error::Unsupported), "root: an unknown label");
    c.eq(
        raw_request(abi::cap::PARENT, rt::proto::LOOKUP, &[rt::alloc_slot()], None),
        Err(Error::Malformed),
        "root: LOOKUP without a name",
    );
    c.eq(raw_request(abi::cap::PARENT, rt::proto::KILL, &[], None), Err(Error::Malformed), "root: KILL without an id");

    // The server crashes while we wait for its answer.
    let mut m = Msg::new(echo::CRASH, &[]);
    c.eq(ipc::call(e, &mut m, FOREVER), Err(Error::NoPartner), "a caller of a crashing server gets an error");
    let mut m = Msg::new(echo::ECHO, &[1]);
    c.eq(ipc::call(e, &mut m, FOREVER), Err(Error::InvalidCap), "the old capability is dead");
    let e2 = rt::alloc_slot();
    c.eq(env::lookup("echo", e2), Ok(()), "root restarted it: the name finds the new instance");
    let mut m = Msg::new(echo::ECHO, &[8]);
    c.eq(ipc::call(e2, &mut m, FOREVER), Ok(()), "the next call succeeds");
    c.eq(m.word(1), 8, "with the right answer");
    c.finish("svc_test")
}
