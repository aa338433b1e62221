//! The ABI's host tests: fpage fields, tags, UTCB offsets, errors, timeouts and the user
//! range round-trip as the kernel and programs read them.

use super::*;

#[test]
fn fpage_fields() {
    use fpage::Fpage;
    let f = Fpage::mem(0x40_0000, 12, mem::READ | mem::WRITE);
    assert_eq!((f.kind(), f.base(), f.log2(), f.size(), f.rights()), (fpage::MEM, 0x40_0000, 12, 4096, 3));
    assert!(f.is_valid());
    assert!(!Fpage::mem(0x40_1000, 13, 1).is_valid(), "misaligned");
    assert!(!Fpage::mem(0x40_0000, 11, 1).is_valid(), "smaller than a page");
    let io = Fpage::io(0x3f8, 3);
    assert_eq!((io.kind(), io.base(), io.size()), (fpage::IO, 0x3f8, 8));
    assert!(io.is_valid());
    assert!(!Fpage::io(0xfff8, 4).is_valid());
    let c = Fpage::caps(16, 2, rights::SEND);
    assert_eq!((c.kind(), c.base(), c.size(), c.rights()), (fpage::CAP, 16, 4, rights::SEND));
    assert!(Fpage::all_mem().is_valid());
    assert!(!Fpage(3).is_valid());
}

#[test]
fn tag_roundtrip() {
    let t = ipc::Tag::new(0x1234, 5).with_string();
    assert_eq!(t.with_items(2).typed(), 4);
    assert!(t.with_items(2).is_valid());
    assert!(!ipc::Tag::new(1, 60).with_items(2).is_valid(), "too many words in all");
    assert!(ipc::Tag::new(1, 6).is_short());
    assert!(!ipc::Tag::new(1, 6).with_items(1).is_short());
    assert_eq!(t.label(), 0x1234);
    assert_eq!(t.words(), 5);
    assert!(t.has_string());
    assert!(t.is_valid());
    assert!(!ipc::Tag::new(1, 64).is_valid());
    assert!(!ipc::Tag(1 << 12).is_valid());
}

/// `is_short`'s one compare says what its definition says: no flag, no typed word,
/// no reserved bit, fewer than `REG_MRS` words — for every low-24-bit pattern, under
/// a few labels.
#[test]
fn is_short_is_its_definition() {
    for label in [0u64, 1, 0xff_ffff_ffff] {
        for low in 0..1u64 << 24 {
            let t = ipc::Tag((label << 24) | low);
            let want = t.words() < ipc::REG_MRS as u64 && t.typed() == 0 && low & 0xff00 == 0 && low & 0x80_0080 == 0;
            assert_eq!(t.is_short(), want, "{low:#x}");
            let want = t.words() < ipc::REG_MRS as u64 && t.typed() == 0 && low & 0xfe00 == 0 && low & 0x80_0080 == 0;
            assert_eq!(t.is_short_or_string(), want, "{low:#x}");
        }
    }
}

#[test]
fn utcb_offsets_match_layout() {
    assert_eq!(core::mem::offset_of!(Utcb, recv_buf_addr), utcb_off::RECV_BUF_ADDR);
    assert_eq!(core::mem::offset_of!(Utcb, recv_str_len), utcb_off::RECV_STR_LEN);
}

#[test]
fn errors_roundtrip() {
    for e in Error::ALL {
        assert_eq!(Error::from_code(e as u64), Some(e));
        assert!(check(e as u64).is_err());
    }
    assert_eq!(check(0), Ok(()));
    assert_eq!(Error::from_code(0), None);
}

#[test]
fn timeouts_pack() {
    let t = ipc::timeouts(5, ipc::INFINITE);
    assert_eq!(ipc::send_timeout(t), 5);
    assert_eq!(ipc::recv_timeout(t), ipc::INFINITE);
}

#[test]
fn user_range() {
    assert!(layout::is_user_range(0x1000, 0x1000));
    assert!(!layout::is_user_range(0, 0x1000));
    assert!(!layout::is_user_range(layout::USER_END - 8, 16));
    assert!(!layout::is_user_range(u64::MAX - 2, 8));
}

#[test]
fn mappable() {
    assert!(layout::is_mappable(0x1000, 0x1000));
    assert!(layout::is_mappable(layout::USER_MAP_END - 0x1000, 0x1000));
    // The last user page is user range, but no page may be mapped there.
    assert!(layout::is_user_range(layout::USER_MAP_END, 0x1000));
    assert!(!layout::is_mappable(layout::USER_MAP_END, 0x1000));
    assert!(!layout::is_mappable(layout::USER_MAP_END - 0x1000, 0x2000));
    assert!(!layout::is_mappable(0, 0x1000));
    assert!(!layout::is_mappable(u64::MAX - 0xfff, 0x1000));
}
