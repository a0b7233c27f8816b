//! The Linux tray icon with the watts drawn in it: many Linux tray hosts drop an item's title, so
//! the number has to be the icon.
//!
//! A 3×5 pixel font scaled by the largest whole number that fits keeps every edge on a pixel, at
//! 22 px and at 44 px. Up to three glyphs: `7.5`, `42`, `312`, `1k2` (see [`icon_text`]). Light digits with a dark outline read on light
//! and dark panels; in low-power mode the digits turn green. No reading shows `--`.

/// RGBA pixels, row by row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rgba {
    pub size: u32,
    pub pixels: Vec<u8>,
}

const GLYPH_H: usize = 5;

/// Each glyph: rows of bits, most significant of `width` bits first.
fn glyph(c: char) -> Option<(usize, [u8; GLYPH_H])> {
    Some(match c {
        '0' => (3, [0b111, 0b101, 0b101, 0b101, 0b111]),
        '1' => (3, [0b010, 0b110, 0b010, 0b010, 0b111]),
        '2' => (3, [0b111, 0b001, 0b111, 0b100, 0b111]),
        '3' => (3, [0b111, 0b001, 0b011, 0b001, 0b111]),
        '4' => (3, [0b101, 0b101, 0b111, 0b001, 0b001]),
        '5' => (3, [0b111, 0b100, 0b111, 0b001, 0b111]),
        '6' => (3, [0b111, 0b100, 0b111, 0b101, 0b111]),
        '7' => (3, [0b111, 0b001, 0b010, 0b010, 0b010]),
        '8' => (3, [0b111, 0b101, 0b111, 0b101, 0b111]),
        '9' => (3, [0b111, 0b101, 0b111, 0b001, 0b111]),
        '.' => (1, [0, 0, 0, 0, 1]),
        '-' => (3, [0, 0, 0b111, 0, 0]),
        'k' => (3, [0b100, 0b101, 0b110, 0b101, 0b101]),
        _ => return None,
    })
}

/// What fits in the icon: one decimal below 10 W, whole watts to 999, then kilowatts (`1k2`).
pub fn icon_text(watts: Option<f64>) -> String {
    match watts.filter(|w| w.is_finite() && *w >= 0.0) {
        None => "--".to_string(),
        Some(w) if w < 9.95 => format!("{w:.1}"),
        Some(w) if w < 999.5 => format!("{w:.0}"),
        Some(w) => {
            let kw = w / 1000.0;
            if kw < 9.95 {
                let tenths = (kw * 10.0).round() as u64;
                format!("{}k{}", tenths / 10, tenths % 10)
            } else {
                format!("{:.0}k", kw.min(99.0))
            }
        }
    }
}

const FG: [u8; 4] = [0xf2, 0xf2, 0xf2, 0xff];
const FG_LOW_POWER: [u8; 4] = [0x4a, 0xd2, 0x6b, 0xff];
const OUTLINE: [u8; 4] = [0x1b, 0x1b, 0x1f, 0xff];

/// Draws `text` centred in a `size`×`size` icon (size 22 or 44; others take the nearest scale).
pub fn render(text: &str, size: u32, low_power: bool) -> Rgba {
    let n = size as usize;
    let glyphs: Vec<(usize, [u8; GLYPH_H])> = text.chars().filter_map(glyph).collect();
    let columns: usize = glyphs.iter().map(|g| g.0).sum::<usize>() + glyphs.len().saturating_sub(1);
    // The largest whole scale that fits with a pixel of outline on each side.
    let fit_w = (n.saturating_sub(2)) / columns.max(1);
    let fit_h = (n.saturating_sub(2)) / GLYPH_H;
    let scale = fit_w.min(fit_h).max(1);
    let mut ink = vec![false; n * n];
    let width = columns * scale;
    let height = GLYPH_H * scale;
    let x0 = n.saturating_sub(width) / 2;
    let y0 = n.saturating_sub(height) / 2;
    let mut x = x0;
    for (w, rows) in &glyphs {
        for (row, bits) in rows.iter().enumerate() {
            for col in 0..*w {
                if bits >> (w - 1 - col) & 1 == 1 {
                    for dy in 0..scale {
                        for dx in 0..scale {
                            let px = x + col * scale + dx;
                            let py = y0 + row * scale + dy;
                            if px < n && py < n {
                                ink[py * n + px] = true;
                            }
                        }
                    }
                }
            }
        }
        x += (w + 1) * scale;
    }
    let fg = if low_power { FG_LOW_POWER } else { FG };
    let mut pixels = vec![0u8; n * n * 4];
    for y in 0..n {
        for x in 0..n {
            let colour = if ink[y * n + x] {
                Some(fg)
            } else if near_ink(&ink, n, x, y) {
                Some(OUTLINE)
            } else {
                None
            };
            if let Some(c) = colour {
                pixels[(y * n + x) * 4..(y * n + x) * 4 + 4].copy_from_slice(&c);
            }
        }
    }
    Rgba { size, pixels }
}

/// A square RGBA PNG (8 bits a channel), as the tray's static icons are.
pub fn decode_png(bytes: &[u8]) -> Result<Rgba, String> {
    let mut reader = png::Decoder::new(std::io::Cursor::new(bytes))
        .read_info()
        .map_err(|e| format!("not a PNG: {e}"))?;
    let mut buf = vec![0; reader.output_buffer_size().unwrap_or(0)];
    let info = reader
        .next_frame(&mut buf)
        .map_err(|e| format!("a broken PNG: {e}"))?;
    if info.color_type != png::ColorType::Rgba
        || info.bit_depth != png::BitDepth::Eight
        || info.width != info.height
    {
        return Err(format!(
            "not a square 8-bit RGBA PNG ({:?}, {:?}, {}×{})",
            info.color_type, info.bit_depth, info.width, info.height
        ));
    }
    buf.truncate(info.buffer_size());
    Ok(Rgba {
        size: info.width,
        pixels: buf,
    })
}

fn near_ink(ink: &[bool], n: usize, x: usize, y: usize) -> bool {
    let (x, y) = (x as isize, y as isize);
    (-1..=1).any(|dy| {
        (-1..=1).any(|dx| {
            let (px, py) = (x + dx, y + dy);
            px >= 0
                && py >= 0
                && (px as usize) < n
                && (py as usize) < n
                && ink[py as usize * n + px as usize]
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn golden_dir() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/golden/tray-icon")
    }

    fn decode(path: &PathBuf) -> Rgba {
        let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        decode_png(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    fn encode(icon: &Rgba, path: &PathBuf) {
        let file = std::fs::File::create(path).unwrap_or_else(|e| panic!("{e}"));
        let mut enc = png::Encoder::new(std::io::BufWriter::new(file), icon.size, icon.size);
        enc.set_color(png::ColorType::Rgba);
        enc.set_depth(png::BitDepth::Eight);
        let mut w = enc.write_header().unwrap_or_else(|e| panic!("{e}"));
        w.write_image_data(&icon.pixels)
            .unwrap_or_else(|e| panic!("{e}"));
    }

    /// Renders match the reviewed PNGs in tests/golden/tray-icon. `WATTBAR_BLESS=1` rewrites them
    /// (look at them before committing).
    #[test]
    fn icon_numbers_match_the_golden_pngs() {
        let cases = [
            ("14w-22", icon_text(Some(14.2)), 22, false),
            ("14w-44", icon_text(Some(14.2)), 44, false),
            ("7.5w-44", icon_text(Some(7.46)), 44, false),
            ("312w-44", icon_text(Some(312.4)), 44, false),
            ("1k2w-44", icon_text(Some(1234.0)), 44, false),
            ("none-44", icon_text(None), 44, false),
            ("14w-low-power-44", icon_text(Some(14.2)), 44, true),
        ];
        let bless = std::env::var_os("WATTBAR_BLESS").is_some();
        for (name, text, size, low) in cases {
            let icon = render(&text, size, low);
            let path = golden_dir().join(format!("{name}.png"));
            if bless {
                std::fs::create_dir_all(golden_dir()).unwrap_or_else(|e| panic!("{e}"));
                encode(&icon, &path);
            }
            assert_eq!(
                decode(&path),
                icon,
                "{name} ({text:?}) differs from {path:?}"
            );
        }
    }

    #[test]
    fn the_text_fits_three_glyphs() {
        assert_eq!(icon_text(Some(7.46)), "7.5");
        assert_eq!(icon_text(Some(9.96)), "10");
        assert_eq!(icon_text(Some(312.4)), "312");
        assert_eq!(icon_text(Some(1234.0)), "1k2");
        assert_eq!(icon_text(Some(25_000.0)), "25k");
        assert_eq!(icon_text(None), "--");
        assert_eq!(icon_text(Some(f64::NAN)), "--");
    }

    #[test]
    fn digits_are_drawn_at_whole_scales_and_low_power_changes_the_colour() {
        // "14" at 44 px: 3+1+3 columns at scale 6 = 42 px wide, 30 px tall.
        let icon = render("14", 44, false);
        let lit = |icon: &Rgba, c: [u8; 4]| icon.pixels.chunks(4).filter(|p| *p == c).count();
        // '1' lights 8 cells, '4' lights 9: 17 cells of 6×6 pixels.
        assert_eq!(lit(&icon, FG), 17 * 36);
        let low = render("14", 44, true);
        assert_eq!(lit(&low, FG), 0);
        assert_eq!(lit(&low, FG_LOW_POWER), 17 * 36);
    }
}
