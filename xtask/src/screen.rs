//! The machine's screen as QEMU's monitor shows it (`screendump`, a PPM file): does it
//! show a line of text the way the kernel's console (`crates/fbcon`) draws it? Each
//! glyph is compared pixel for pixel, at every row and column of the console's grid.

/// A screendump: width, height, RGB bytes.
pub struct Picture {
    pub width: usize,
    pub height: usize,
    pub rgb: Vec<u8>,
}

/// Read a binary PPM (`P6`, 8 bits a channel), as QEMU's `screendump` writes it.
pub fn parse_ppm(b: &[u8]) -> Result<Picture, String> {
    let mut fields = Vec::new();
    let mut i = 0;
    while fields.len() < 4 {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i < b.len() && b[i] == b'#' {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        let start = i;
        while i < b.len() && !b[i].is_ascii_whitespace() {
            i += 1;
        }
        if start == i {
            return Err("a PPM header cut short".into());
        }
        fields.push(String::from_utf8_lossy(&b[start..i]).into_owned());
    }
    if fields[0] != "P6" || fields[3] != "255" {
        return Err(format!("not an 8-bit binary PPM ({} {})", fields[0], fields[3]));
    }
    let num = |s: &str| s.parse::<usize>().map_err(|_| format!("bad PPM size {s:?}"));
    let (width, height) = (num(&fields[1])?, num(&fields[2])?);
    let rgb = b.get(i + 1..).unwrap_or_default().to_vec();
    if rgb.len() < width * height * 3 {
        return Err(format!("a {width}x{height} PPM with {} bytes of pixels", rgb.len()));
    }
    Ok(Picture { width, height, rgb })
}

impl Picture {
    /// Whether the cell at grid column `col`, row `row` shows character `c`.
    fn cell_is(&self, col: usize, row: usize, c: u8) -> bool {
        let (x0, y0) = (col * fbcon::CELL_W, row * fbcon::CELL_H);
        (0..fbcon::CELL_H).all(|y| {
            (0..fbcon::CELL_W).all(|x| {
                let want = fbcon::shade(fbcon::glyph_pixel(c, x, y)) as i32;
                let at = ((y0 + y) * self.width + x0 + x) * 3;
                self.rgb[at..at + 3].iter().all(|&v| (v as i32 - want).abs() <= 8)
            })
        })
    }

    /// Where (column, row of the console's grid) the screen shows `text`, if it does.
    pub fn find(&self, text: &str) -> Option<(usize, usize)> {
        let (cols, rows) = (self.width / fbcon::CELL_W, self.height / fbcon::CELL_H);
        let t = text.as_bytes();
        for row in 0..rows {
            for col in 0..=cols.saturating_sub(t.len()) {
                if t.iter().enumerate().all(|(i, &c)| self.cell_is(col + i, row, c)) {
                    return Some((col, row));
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    /// What the kernel would draw for `text` on a `w` × `h` screen, as a PPM.
    fn ppm(text: &[u8], w: usize, h: usize) -> Vec<u8> {
        let mut cells = vec![0u8; 4096];
        let mut px = vec![0u32; w * h];
        let mut c = fbcon::Console::new(&mut cells, w, h);
        c.write(text);
        c.flush(&mut fbcon::Surface { pixels: &mut px, width: w, height: h, stride: w });
        let mut out = format!("P6\n# a comment\n{w} {h}\n255\n").into_bytes();
        for p in px {
            out.extend_from_slice(&[(p >> 16) as u8, (p >> 8) as u8, p as u8]);
        }
        out
    }

    #[test]
    fn finds_the_lines_the_console_drew() {
        let (w, h) = (40 * fbcon::CELL_W + 5, 6 * fbcon::CELL_H);
        let p = super::parse_ppm(&ppm(b"Scion microkernel (ABI 2)\nscion> echo typed\ntyped", w, h)).unwrap();
        assert_eq!(p.find("Scion microkernel (ABI 2)"), Some((0, 0)));
        assert_eq!(p.find("echo typed"), Some((7, 1)));
        assert_eq!(p.find("typed"), Some((12, 1)));
        assert_eq!(p.find("Scion microkernel (ABI 3)"), None);
        assert_eq!(p.find("scion> echo typer"), None);
        // A blank screen shows no text.
        let blank = super::parse_ppm(&ppm(b"", w, h)).unwrap();
        assert_eq!(blank.find("scion"), None);
    }

    #[test]
    fn bad_pictures_are_refused() {
        assert!(super::parse_ppm(b"P3\n1 1\n255\n000").is_err());
        assert!(super::parse_ppm(b"P6\n2 2\n255\n\0\0\0").is_err());
        assert!(super::parse_ppm(b"P6\n2").is_err());
        assert!(super::parse_ppm(b"P6\nx 2\n255\n").is_err());
    }
}
