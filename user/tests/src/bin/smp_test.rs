//! The CPUs (`KERNEL_INFO_SMP`): as many run as the machine has (the argument), the
//! others take their own timer interrupts while this program sleeps and spins on the
//! boot CPU, and the kernel lock passes between the CPUs; with one CPU none of that
//! happens.
#![no_std]
#![no_main]

use rt::sys;
use tests::Checks;

rt::entry!(main);

fn main() -> i32 {
    let mut c = Checks::new();
    let want: u64 = rt::args().split(' ').nth(1).and_then(|a| a.parse().ok()).unwrap_or(1);
    let before = sys::smp_info();
    c.eq(before.cpus, want, "CPUs running");
    // Sleep (the boot CPU idles) and spin (it is busy in user mode): the other CPUs' timers
    // tick meanwhile, and each tick takes the kernel lock.
    sys::sleep_us(50_000);
    let t0 = sys::now_us();
    while sys::now_us() < t0 + 50_000 {
        core::hint::spin_loop();
    }
    let after = sys::smp_info();
    rt::println!("smp_test: {before:?} -> {after:?}");
    if want > 1 {
        c.check(after.ap_ticks > before.ap_ticks + 20, "the other CPUs take timer interrupts (≥ 20 in 100 ms)");
        c.check(after.handovers > before.handovers + 20, "the kernel lock passes between the CPUs");
    } else {
        c.eq(after.ap_ticks, 0, "no other CPU ticks");
        c.eq(after.handovers, 0, "the lock never changes CPU");
    }
    c.finish("smp_test")
}
