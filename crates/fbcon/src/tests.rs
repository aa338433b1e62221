extern crate std;
use super::*;
use std::vec;
use std::vec::Vec;

struct Screen {
    px: Vec<u32>,
    w: usize,
    h: usize,
}

impl Screen {
    fn new(cols: usize, rows: usize) -> Screen {
        let (w, h) = (cols * CELL_W + 3, rows * CELL_H + 5);
        Screen { px: vec![0x123456; w * h], w, h }
    }
    fn surface(&mut self) -> Surface<'_> {
        Surface { pixels: &mut self.px, width: self.w, height: self.h, stride: self.w }
    }
    /// Whether row `r` of the screen shows `text` from column 0, pixel for pixel.
    fn shows(&self, r: usize, text: &str) -> bool {
        text.bytes().enumerate().all(|(i, c)| {
            (0..CELL_H).all(|y| {
                (0..CELL_W).all(|x| {
                    let g = shade(glyph_pixel(c, x, y)) as u32;
                    self.px[(r * CELL_H + y) * self.w + i * CELL_W + x] == (g << 16) | (g << 8) | g
                })
            })
        })
    }
}

fn text(c: &Console<'_>, r: usize) -> std::string::String {
    std::string::String::from_utf8_lossy(c.row_text(r)).trim_end().into()
}

#[test]
fn glyphs_have_ink_and_blanks_have_none() {
    const { assert!(CELL_W >= 6 && CELL_W <= 12) };
    let ink = |c: u8| {
        (0..CELL_H).flat_map(|y| (0..CELL_W).map(move |x| (x, y))).filter(|&(x, y)| glyph_pixel(c, x, y) > 128).count()
    };
    assert!(ink(b'S') > 10);
    assert_eq!(ink(b' '), 0);
    assert_ne!(
        (0..CELL_H).map(|y| glyph_pixel(b'l', 3, y)).collect::<Vec<_>>(),
        (0..CELL_H).map(|y| glyph_pixel(b'o', 3, y)).collect::<Vec<_>>()
    );
    // Anything outside printable ASCII is drawn as `?`.
    assert_eq!(glyph_pixel(0x90, 3, 8), glyph_pixel(b'?', 3, 8));
}

#[test]
fn text_is_drawn_where_the_grid_says() {
    let mut cells = [0u8; 40 * 10];
    let mut s = Screen::new(40, 10);
    let mut c = Console::new(&mut cells, s.w, s.h);
    assert_eq!((c.cols(), c.rows()), (40, 10));
    c.write(b"Scion microkernel\nscion> ");
    c.flush(&mut s.surface());
    assert!(s.shows(0, "Scion microkernel"));
    assert!(s.shows(1, "scion> "));
    assert!(!s.shows(1, "Scion"));
    // The first flush cleared the whole grid's area, not beyond it.
    assert_eq!(s.px[9 * CELL_H * s.w + 39 * CELL_W], 0);
    assert_eq!(s.px[s.w - 1], 0x123456);
    assert_eq!(c.cursor(), (7, 1));
}

#[test]
fn many_lines_scroll_in_one_copy() {
    let mut cells = [0u8; 20 * 4];
    let mut s = Screen::new(20, 4);
    let mut c = Console::new(&mut cells, s.w, s.h);
    c.write(b"one\ntwo\nthree\n");
    c.flush(&mut s.surface());
    c.write(b"four\nfive");
    assert_eq!(text(&c, 0), "two");
    c.flush(&mut s.surface());
    for (r, t) in ["two", "three", "four", "five"].iter().enumerate() {
        assert!(s.shows(r, t), "row {r}");
    }
    // More lines than the screen has: everything drawn again.
    for i in 0..50 {
        c.write(std::format!("line {i}\n").as_bytes());
    }
    c.flush(&mut s.surface());
    assert!(s.shows(0, "line 47") && s.shows(2, "line 49"));
    assert_eq!(text(&c, 3), "");
}

#[test]
fn the_line_editors_escapes() {
    let mut cells = [0u8; 30 * 3];
    let mut c = Console::new(&mut cells, 30 * CELL_W, 3 * CELL_H);
    c.write(b"scion> echo abc\x1b[2D\x1b[KX\x08Y\rZ");
    assert_eq!(text(&c, 0), "Zcion> echo aY");
    c.write(b"\x1b[3C\x1b[?25l\x1bx!\tT");
    assert_eq!(text(&c, 0), "Zcio!   Tho aY");
    c.write("\n\u{2014}é\u{1F600}.".as_bytes());
    assert_eq!(text(&c, 1), "???.");
    // Long lines wrap; a cursor right cannot leave the grid.
    c.write(&[b'x'; 31]);
    assert_eq!(text(&c, 2), "xxxxx");
    c.write(b"\x1b[999C?\x1b[99999999999999999999D!");
    assert_eq!(text(&c, 2), "!xxxx                        ?");
}

#[test]
fn random_bytes_never_panic() {
    let mut cells = [0u8; 13 * 5];
    let mut s = Screen::new(13, 5);
    let mut c = Console::new(&mut cells, s.w, s.h);
    let mut x = 88172645463325252u64;
    for _ in 0..2000 {
        let mut buf = [0u8; 37];
        for b in buf.iter_mut() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        }
        c.write(&buf);
        c.flush(&mut s.surface());
        let (col, row) = c.cursor();
        assert!(col <= c.cols() && row < c.rows());
    }
    // A surface smaller than the grid is drawn as far as it goes.
    let mut small = vec![0u32; 10];
    c.write(b"hi\n");
    c.flush(&mut Surface { pixels: &mut small, width: 10, height: 1, stride: 10 });
}
