//! hpc-render: how hpc-sizer's records are drawn for people, shared by
//! `hpc-plot` (files and mail) and `hpc-web` (pages served on demand), so
//! there is one renderer.
//!
//! - [`stream::Stream`]: records gathered for drawing, read by
//!   [`input::read_records`];
//! - [`draw`], [`panels`], [`job`], [`spark`]: one job's six panels
//!   ([`panels::PANELS`]) as PNG, SVG or Unicode sparklines;
//! - [`report`]: bar charts of report rows;
//! - [`html`]: pages with inline CSS and SVG, every user string escaped.

pub mod draw;
pub mod html;
pub mod input;
pub mod job;
pub mod panels;
pub mod reduce;
pub mod report;
pub mod spark;
pub mod stream;

use std::path::Path;

use hpc_core::paths::shown;
use hpc_core::{Error, Result};

/// An output format of an image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// PNG bitmap.
    Png,
    /// SVG document.
    Svg,
    /// Unicode sparklines.
    Txt,
}

impl Format {
    /// The format from `--format`, else from the output name's extension,
    /// else `default`; `allowed` lists what the subcommand draws.
    pub fn pick(
        flag: Option<&str>,
        out: &str,
        default: Format,
        allowed: &[Format],
    ) -> Result<Format> {
        let ext = Path::new(out)
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        let name = flag.map(str::to_ascii_lowercase).or(ext);
        let f = match name.as_deref() {
            None => default,
            Some("png") => Format::Png,
            Some("svg") => Format::Svg,
            Some("txt") => Format::Txt,
            Some(other) if flag.is_some() => {
                return Err(Error::Usage(format!(
                    "--format {}: not png, svg or txt",
                    shown(Path::new(other))
                )))
            }
            // `-o plot.jpg` wrote a PNG under that name without a word: the
            // name of another picture or page format is refused; any other
            // (`job.42`) takes the default.
            Some(
                "jpg" | "jpeg" | "gif" | "bmp" | "tif" | "tiff" | "webp" | "pdf" | "eps" | "ps"
                | "html" | "htm",
            ) => {
                return Err(Error::Usage(format!(
                    "-o {}: its extension is not png, svg or txt (give --format)",
                    shown(Path::new(out))
                )))
            }
            Some(_) => default,
        };
        if !allowed.contains(&f) {
            return Err(Error::Usage(format!(
                "format {f:?} is not drawn by this subcommand"
            )));
        }
        Ok(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_format_comes_from_the_flag_then_the_name() {
        let all = [Format::Png, Format::Svg, Format::Txt];
        assert_eq!(
            Format::pick(None, "a.PNG", Format::Txt, &all).unwrap(),
            Format::Png
        );
        assert_eq!(
            Format::pick(Some("svg"), "a.png", Format::Txt, &all).unwrap(),
            Format::Svg
        );
        assert_eq!(
            Format::pick(None, "-", Format::Txt, &all).unwrap(),
            Format::Txt
        );
        assert_eq!(
            Format::pick(None, "a.out", Format::Png, &all).unwrap(),
            Format::Png
        );
        assert!(matches!(
            Format::pick(None, "a.JPG", Format::Png, &all),
            Err(Error::Usage(_))
        ));
        assert!(matches!(
            Format::pick(Some("gif"), "-", Format::Txt, &all),
            Err(Error::Usage(_))
        ));
        let images = [Format::Png, Format::Svg];
        assert!(matches!(
            Format::pick(Some("txt"), "-", Format::Svg, &images),
            Err(Error::Usage(_))
        ));
    }
}
