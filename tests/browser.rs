//! report.html in a real browser (headless Chromium; `.ci/run` installs it): the plots render
//! as SVG in the page's DOM and a screenshot of the page is not blank. Runs in the `full`
//! profile.

use std::path::Path;
use std::process::Command;

use crate::support::scratch;

fn chromium(args: &[&str], out: &Path) -> std::process::Output {
    let mut c = Command::new("chromium");
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
    ])
    .args(["--window-size=1200,2400"])
    .args(args)
    .current_dir(out);
    c.output()
        .expect("chromium is installed (apt-get install chromium; .ci/run does)")
}

#[test]
#[ignore = "needs chromium: scripts/test installs it and runs this"]
fn report_html_renders_its_plots_in_chromium() {
    let dir = scratch();
    let (code, o, e, out) =
        crate::support::quickstart(dir.path(), &["--rate", "300", "--set", "load.warmup=1s"]);
    assert_eq!(code, 0, "{o}{e}");
    let page = format!("file://{}", out.join("report.html").display());
    let dom = chromium(&["--dump-dom", &page], dir.path());
    let dom = String::from_utf8_lossy(&dom.stdout);
    assert!(
        dom.matches("<svg").count() >= 5,
        "five plots for an open-loop run: {dom}"
    );
    assert!(dom.contains("<polyline"), "lines drawn");
    assert!(dom.contains("lateness p99"), "the open-loop plot");

    let shot = |name: &str, url: &str| {
        let path = dir.path().join(name);
        let arg = format!("--screenshot={}", path.display());
        let r = chromium(&[&arg, url], dir.path());
        let bytes = std::fs::read(&path)
            .unwrap_or_else(|_| panic!("no screenshot: {}", String::from_utf8_lossy(&r.stderr)));
        assert!(bytes.starts_with(b"\x89PNG"), "a PNG");
        bytes.len()
    };
    let blank = shot("blank.png", "about:blank");
    let report = shot("report.png", &page);
    // A blank page compresses to almost nothing; text, tables and plots do not.
    assert!(
        report > 5 * blank,
        "the screenshot is not blank: {report} bytes vs {blank} for an empty page"
    );
}
