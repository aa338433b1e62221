//! K42's hot swapping from the shell: `swap list`, `swap S.C IMPL` and `interpose S.C
//! KIND`, at the servers with swappable components (`swap_api`).

use crate::help::usage;
use crate::words;
use alloc::string::String;
use rt::{env, println};

/// Servers with swappable components (`swap_api`).
const SWAP_SERVERS: [&str; 2] = ["cache", "files"];

/// `swap list`, `swap S.C IMPL`, `interpose S.C KIND`.
pub(crate) fn reconfigure(cmd: &str, args: &str) {
    use swap_api::client as sw;
    let w: alloc::vec::Vec<&str> = args.split_whitespace().collect();
    let mut buf = alloc::vec![0u8; 4096];
    let list = |srv: u64, buf: &mut [u8]| -> Option<String> {
        sw::list(srv, buf).ok().map(|n| String::from_utf8_lossy(&buf[..n]).into_owned())
    };
    if cmd == "swap" && w == ["list"] {
        for name in SWAP_SERVERS {
            let srv = rt::alloc_slot();
            match env::lookup(name, srv).ok().and_then(|_| list(srv, &mut buf)) {
                Some(t) => t.lines().for_each(|l| println!("{}.{}", name, l)),
                None => println!("swap: this shell cannot ask the `{}` server", name),
            }
            rt::free_slot(srv);
        }
        return;
    }
    let [target, what] = w[..] else { return usage(cmd) };
    let Some((server, component)) = target.split_once('.') else { return usage(cmd) };
    let srv = rt::alloc_slot();
    if env::lookup(server, srv).is_err() {
        rt::free_slot(srv);
        return println!(
            "{}: this shell cannot ask a server called `{}` (there are: {})",
            cmd,
            server,
            SWAP_SERVERS.join(", ")
        );
    }
    // The component's number is its line in the server's list; its implementations are
    // the third field.
    let text = list(srv, &mut buf).unwrap_or_default();
    let found = text.lines().enumerate().find(|(_, l)| l.split(' ').next() == Some(component));
    match found {
        None => println!("{}: `{}` has no component `{}`", cmd, server, component),
        Some((k, line)) if cmd == "swap" => {
            let impls = line.split(' ').nth(2).unwrap_or("");
            match impls.split(',').position(|i| i == what) {
                None => {
                    println!("swap: {}.{} has no implementation `{}` (there is: {})", server, component, what, impls)
                }
                Some(i) => match sw::swap(srv, k, i, &mut buf) {
                    Ok((format, cycles)) => println!(
                        "swapped {}.{} to {}: state moved in format {}, {} cycles",
                        server, component, what, format, cycles
                    ),
                    Err((e, 0)) => println!("swap: {}.{} was not swapped: {}", server, component, words(e)),
                    Err((_, n)) => println!(
                        "swap: {}.{} was not swapped: {}",
                        server,
                        component,
                        String::from_utf8_lossy(&buf[..n])
                    ),
                },
            }
        }
        Some((k, _)) => match swap_api::KINDS.iter().position(|x| *x == what) {
            None => println!("interpose: no interposer `{}` (there is: {})", what, swap_api::KINDS.join(", ")),
            Some(kind) => match sw::interpose(srv, k, kind as u64) {
                Ok(()) => println!("{}.{}: interposer {}", server, component, what),
                Err(e) => println!("interpose: {}.{}: {}", server, component, words(e)),
            },
        },
    }
    rt::free_slot(srv);
}
