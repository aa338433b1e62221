//! A text console on a framebuffer: what the kernel shows on the firmware's screen (its
//! log, and what the console server writes there). A grid of cells (one byte each)
//! holds the text; `write` changes the grid and notes which rows changed and how far
//! the text scrolled, and `flush` brings the screen up to date in one copy (the scroll)
//! and one drawing of each changed row — so a write of many lines costs one scroll, not
//! one a line, and its time is bounded by the screen's size.
//!
//! It understands what Scion's line editor sends (`crates/lineedit`): newline, carriage
//! return, backspace, tab, and the CSI escapes `ESC [ n D` (left), `ESC [ n C` (right)
//! and `ESC [ K` (erase to the line's end); any other escape is read and ignored. Bytes
//! outside printable ASCII show as `?` (a UTF-8 character's lead byte; its continuation
//! bytes show nothing). Glyphs are Noto Sans Mono, 16 pixels high, grey on black (the
//! same in RGB and BGR pixel orders).
#![no_std]
#![forbid(unsafe_code)]

use noto_sans_mono_bitmap::{get_raster, get_raster_width, FontWeight, RasterHeight};

/// A cell's size in pixels.
pub const CELL_H: usize = 16;
pub const CELL_W: usize = get_raster_width(FontWeight::Regular, RasterHeight::Size16);
/// The most rows a console keeps (an 8K screen has fewer).
pub const MAX_ROWS: usize = 320;
/// The text's grey: a glyph's full intensity.
pub const FOREGROUND: u8 = 0xaa;

/// The pixels a console draws on: 32 bits a pixel, `stride` pixels from one row to the
/// next.
pub struct Surface<'a> {
    pub pixels: &'a mut [u32],
    pub width: usize,
    pub height: usize,
    pub stride: usize,
}

/// Character `c`'s glyph (`?` for anything outside printable ASCII).
fn glyph(c: u8) -> Option<noto_sans_mono_bitmap::RasterizedChar> {
    let ch = if (0x20..0x7f).contains(&c) { c as char } else { '?' };
    get_raster(ch, FontWeight::Regular, RasterHeight::Size16)
}

/// The intensity (0..=255) of pixel (`x`, `y`) of character `c`'s cell.
pub fn glyph_pixel(c: u8, x: usize, y: usize) -> u8 {
    if c == b' ' {
        return 0;
    }
    glyph(c).and_then(|r| r.pixel(x, y)).unwrap_or(0)
}

/// The grey a glyph pixel of intensity `v` is drawn in (0: the background).
pub fn shade(v: u8) -> u8 {
    (v as u32 * FOREGROUND as u32 / 255) as u8
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Escape {
    None,
    /// After ESC.
    Started,
    /// Inside `ESC [`: the number so far.
    Csi(u32),
}

pub struct Console<'a> {
    cells: &'a mut [u8],
    cols: usize,
    rows: usize,
    col: usize,
    row: usize,
    /// Lines the text moved up since the last flush.
    scrolled: usize,
    /// Rows changed since the last flush (in the grid as it is now).
    dirty: [bool; MAX_ROWS],
    esc: Escape,
    /// Continuation bytes of a UTF-8 character to skip.
    skip: u8,
}

impl<'a> Console<'a> {
    /// A console over a `width` × `height` pixel screen, its grid in `cells` (which
    /// bounds it: `cols * rows <= cells.len()`). Every row starts blank and dirty, so
    /// the first flush clears the screen.
    pub fn new(cells: &'a mut [u8], width: usize, height: usize) -> Console<'a> {
        let cols = (width / CELL_W).max(1);
        let rows = (height / CELL_H).min(MAX_ROWS).min(cells.len() / cols).max(1);
        cells.fill(b' ');
        Console { cells, cols, rows, col: 0, row: 0, scrolled: 0, dirty: [true; MAX_ROWS], esc: Escape::None, skip: 0 }
    }

    pub fn cols(&self) -> usize {
        self.cols
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The text of row `r` (trailing blanks included).
    pub fn row_text(&self, r: usize) -> &[u8] {
        &self.cells[r * self.cols..(r + 1) * self.cols]
    }

    /// The cursor: (column, row).
    pub fn cursor(&self) -> (usize, usize) {
        (self.col, self.row)
    }

    fn set(&mut self, c: u8) {
        let i = self.row * self.cols + self.col;
        self.cells[i] = c;
        self.dirty[self.row] = true;
    }

    fn newline(&mut self) {
        self.col = 0;
        if self.row + 1 < self.rows {
            self.row += 1;
            return;
        }
        let (cols, rows) = (self.cols, self.rows);
        self.cells.copy_within(cols..cols * rows, 0);
        self.cells[cols * (rows - 1)..cols * rows].fill(b' ');
        self.dirty.copy_within(1..rows, 0);
        self.dirty[rows - 1] = true;
        self.scrolled += 1;
    }

    /// Take `bytes` into the grid (the screen changes at `flush`).
    pub fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.byte(b);
        }
    }

    fn byte(&mut self, b: u8) {
        match self.esc {
            Escape::Started => {
                self.esc = if b == b'[' { Escape::Csi(0) } else { Escape::None };
                return;
            }
            Escape::Csi(n) => {
                match b {
                    b'0'..=b'9' => self.esc = Escape::Csi(n.saturating_mul(10).saturating_add((b - b'0') as u32)),
                    b';' | b'?' => self.esc = Escape::Csi(0),
                    0x40..=0x7e => {
                        self.esc = Escape::None;
                        let n = (n as usize).max(1);
                        match b {
                            b'D' => self.col = self.col.saturating_sub(n),
                            b'C' => self.col = (self.col + n).min(self.cols - 1),
                            b'K' => {
                                let i = self.row * self.cols;
                                self.cells[i + self.col..i + self.cols].fill(b' ');
                                self.dirty[self.row] = true;
                            }
                            _ => {}
                        }
                    }
                    _ => self.esc = Escape::None,
                }
                return;
            }
            Escape::None => {}
        }
        if self.skip > 0 && b & 0xc0 == 0x80 {
            self.skip -= 1;
            return;
        }
        self.skip = 0;
        match b {
            b'\n' => self.newline(),
            b'\r' => self.col = 0,
            0x08 => self.col = self.col.saturating_sub(1),
            b'\t' => {
                let to = (self.col / 8 + 1) * 8;
                while self.col < to.min(self.cols) {
                    self.set(b' ');
                    self.col += 1;
                }
                if self.col >= self.cols {
                    self.newline();
                }
            }
            0x1b => self.esc = Escape::Started,
            0x20..=0x7e | 0x80..=0xff => {
                if b >= 0x80 {
                    // A UTF-8 lead byte shows as one `?`; its continuation bytes as nothing.
                    self.skip = match b {
                        0xc0..=0xdf => 1,
                        0xe0..=0xef => 2,
                        0xf0..=0xf7 => 3,
                        _ => 0,
                    };
                }
                if self.col >= self.cols {
                    self.newline();
                }
                self.set(if b < 0x80 { b } else { b'?' });
                self.col += 1;
            }
            _ => {}
        }
    }

    /// Bring `s` up to date: one copy for the lines scrolled since the last flush, then
    /// the rows that changed, drawn whole.
    pub fn flush(&mut self, s: &mut Surface<'_>) {
        let rows = self.rows.min(s.height / CELL_H);
        let width = (self.cols * CELL_W).min(s.width);
        let scroll = self.scrolled;
        self.scrolled = 0;
        if scroll >= rows {
            self.dirty[..rows].fill(true);
        } else if scroll > 0 {
            let (from, len) = (scroll * CELL_H * s.stride, (rows - scroll) * CELL_H * s.stride);
            if from + len <= s.pixels.len() {
                s.pixels.copy_within(from..from + len, 0);
            } else {
                self.dirty[..rows].fill(true);
            }
        }
        for r in 0..rows {
            if !self.dirty[r] {
                continue;
            }
            self.dirty[r] = false;
            // One glyph lookup a cell, then its pixels row by row.
            for col in 0..width.div_ceil(CELL_W) {
                let c = self.cells[r * self.cols + col];
                let raster = if c == b' ' { None } else { glyph(c) };
                let x0 = col * CELL_W;
                let w = CELL_W.min(width - x0);
                for y in 0..CELL_H {
                    let at = (r * CELL_H + y) * s.stride + x0;
                    let Some(line) = s.pixels.get_mut(at..at + w) else { continue };
                    for (x, p) in line.iter_mut().enumerate() {
                        let v = raster.as_ref().and_then(|g| g.pixel(x, y)).unwrap_or(0);
                        let g = shade(v) as u32;
                        *p = (g << 16) | (g << 8) | g;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
