//! Finding the CUDA libraries without a panic. cudarc's dynamic loader panics on the first
//! call into a library it cannot open, so every library is checked here with cudarc's own
//! `is_culib_present()` (the same file names, in the same order) before anything calls it.

/// One CUDA library the executor needs, and whether the dynamic loader found it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LibraryCheck {
    /// What the library is, in words ("the CUDA driver").
    pub what: &'static str,
    /// The library stems cudarc tries ("cuda", "nvcuda").
    pub stems: &'static [&'static str],
    /// Every file name cudarc's loader tries, in order.
    pub candidates: Vec<String>,
    pub present: bool,
}

/// The CUDA driver library (libcuda), needed for everything on a device.
pub fn driver() -> LibraryCheck {
    // SAFETY: is_culib_present only dlopen-s the library (running its initialisers, which
    // the CUDA libraries are built to allow) and closes it again; it calls nothing in it.
    let present = unsafe { cudarc::driver::sys::is_culib_present() };
    check("the CUDA driver", &["cuda", "nvcuda"], present)
}

/// The NVRTC runtime compiler (libnvrtc), needed to build the kernels.
pub fn nvrtc() -> LibraryCheck {
    // SAFETY: as in `driver`: a dlopen and dlclose, no call into the library.
    let present = unsafe { cudarc::nvrtc::sys::is_culib_present() };
    check("the NVRTC runtime compiler", &["nvrtc"], present)
}

/// cuBLAS (libcublas), needed for Gemm, MatMul and Conv.
pub fn cublas() -> LibraryCheck {
    // SAFETY: as in `driver`: a dlopen and dlclose, no call into the library.
    let present = unsafe { cudarc::cublas::sys::is_culib_present() };
    check("cuBLAS", &["cublas"], present)
}

/// Every library the executor needs, in the order they are used.
pub fn all() -> Vec<LibraryCheck> {
    vec![driver(), nvrtc(), cublas()]
}

/// Why the libraries that are missing make the executor unavailable, in one line: which
/// libraries, and where the loader looked. Every file name tried is in [`search_report`]
/// (`concord info` prints it), not here: this reason is repeated in warnings, Deny errors,
/// skip tables and JUnit reports, so it must fit on a line.
pub fn missing_reason(checks: &[LibraryCheck]) -> Option<String> {
    let missing: Vec<String> = checks
        .iter()
        .filter(|c| !c.present)
        .map(|c| format!("lib{}", c.stems.first().copied().unwrap_or("?")))
        .collect();
    let names = match missing.as_slice() {
        [] => return None,
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    };
    Some(format!(
        "{names} not found (searched LD_LIBRARY_PATH and the system paths; `concord info` \
         lists every name tried)"
    ))
}

/// Everything the loader tried for each missing library, one line per library plus where
/// it looked and what to do: the long form of [`missing_reason`], for `concord info`.
pub fn search_report(checks: &[LibraryCheck]) -> Vec<String> {
    let mut lines: Vec<String> = checks
        .iter()
        .filter(|c| !c.present)
        .map(|c| {
            format!(
                "{} (lib{}) not found; tried {}",
                c.what,
                c.stems.first().copied().unwrap_or("?"),
                c.candidates.join(", ")
            )
        })
        .collect();
    if lines.is_empty() {
        return lines;
    }
    lines.push(format!(
        "the dynamic loader searched LD_LIBRARY_PATH ({}) and the system library paths; \
         install the NVIDIA driver and the CUDA runtime libraries, or point LD_LIBRARY_PATH \
         at them",
        // One directory per comma, so that `concord info` can wrap a long path at spaces.
        std::env::var("LD_LIBRARY_PATH")
            .ok()
            .filter(|v| !v.is_empty())
            .map(|v| v.split(':').collect::<Vec<_>>().join(", "))
            .unwrap_or_else(|| "unset".to_string())
    ));
    lines
}

fn check(what: &'static str, stems: &'static [&'static str], present: bool) -> LibraryCheck {
    LibraryCheck {
        what,
        stems,
        candidates: stems
            .iter()
            .flat_map(|s| cudarc::get_lib_name_candidates(s))
            .fold(Vec::new(), |mut unique: Vec<String>, name| {
                // cudarc's list repeats some names (libnvrtc.so.12 twice for CUDA 12).
                if !unique.contains(&name) {
                    unique.push(name);
                }
                unique
            }),
        present,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn missing(what: &'static str, stems: &'static [&'static str]) -> LibraryCheck {
        check(what, stems, false)
    }

    fn present(what: &'static str, stems: &'static [&'static str]) -> LibraryCheck {
        check(what, stems, true)
    }

    /// The reason is repeated in warnings, Deny errors, skip tables and JUnit reports: one
    /// line, whatever is missing, while the long form keeps every file name tried.
    #[test]
    fn the_reason_is_one_line_and_the_long_form_has_every_name() {
        let none = [
            missing("the CUDA driver", &["cuda", "nvcuda"]),
            missing("the NVRTC runtime compiler", &["nvrtc"]),
            missing("cuBLAS", &["cublas"]),
        ];
        let driver_only = [
            missing("the CUDA driver", &["cuda", "nvcuda"]),
            present("the NVRTC runtime compiler", &["nvrtc"]),
            present("cuBLAS", &["cublas"]),
        ];
        let all_three = missing_reason(&none).unwrap_or_default();
        let one = missing_reason(&driver_only).unwrap_or_default();
        insta::assert_snapshot!("reason_all_missing", all_three);
        insta::assert_snapshot!("reason_driver_missing", one);
        for reason in [&all_three, &one] {
            assert!(!reason.contains('\n') && reason.len() <= 200, "{reason}");
        }
        let long = search_report(&none).join("\n");
        for name in none.iter().flat_map(|c| &c.candidates) {
            assert!(long.contains(name.as_str()), "{name} missing from {long}");
        }
        let everything = [present("cuBLAS", &["cublas"])];
        assert_eq!(missing_reason(&everything), None);
        assert!(search_report(&everything).is_empty());
    }
}
