//! view_image and zoom through the real binary, on generated images, for vision and text-only
//! models of both wire formats.

use super::tools::{Api, abs, gradient, nova_on, png, run_calls, size_of};
use crate::support::big_png::write_uniform_16_bit;
use crate::support::mock_llm::MockLlm;
use image::ImageFormat;
use serde_json::json;
use std::io::Cursor;

#[test]
fn view_image_shows_downscales_and_reaches_an_ollama_vision_model() {
    let mock = MockLlm::start();
    let small = png(64, 48);
    let builder = nova_on(&mock, Api::Ollama, "vision-model")
        .file("small.png", &small)
        .file("wide.png", png(3000, 1000))
        .file("notes.png", "just text");
    let ran = run_calls(
        mock,
        builder,
        Api::Ollama,
        vec![
            ("small", "view_image", json!({"path": "small.png"})),
            ("wide", "view_image", json!({"path": "wide.png"})),
            ("text", "view_image", json!({"path": "notes.png"})),
            ("gone", "view_image", json!({"path": "gone.png"})),
        ],
    );
    let out = ran.outcome("small");
    assert_eq!(out.image("image/png"), small);
    let text = out.text();
    assert!(
        text.starts_with("Image file small.png: PNG, 64x48 px, "),
        "{text}"
    );
    assert_eq!(out.sent["content"], text);
    assert_eq!(out.sent["images"], json!([out.image_data()]));

    let wide = ran.outcome("wide");
    let (w, h) = size_of(&wide.image("image/png"));
    assert_eq!(w, 2000);
    assert!(h == 666 || h == 667, "{w}x{h}");
    let text = wide.text();
    assert!(
        text.starts_with("Image file wide.png: PNG, 3000x1000 px, "),
        "{text}"
    );
    assert!(text.contains("[Downscaled from 3000x1000 px ("), "{text}");
    assert!(text.contains(&format!(" to {w}x{h} px (")), "{text}");
    assert_eq!(wide.sent["images"], json!([wide.image_data()]));

    let not_image = ran.outcome("text");
    assert_eq!(
        not_image.err(),
        format!(
            "Not a PNG, JPEG, GIF or WebP image: {}",
            abs(&ran.nova, "notes.png")
        )
    );
    assert!(not_image.sent.get("images").is_none());
    assert!(
        ran.outcome("gone").err().starts_with("ENOENT"),
        "{}",
        ran.outcome("gone").end
    );
}

#[test]
fn view_image_reaches_an_openai_vision_model_in_a_following_user_message() {
    let mock = MockLlm::start();
    let builder = nova_on(&mock, Api::OpenAi, "vision-model")
        .file("a.png", png(20, 10))
        .file("b.png", png(10, 20));
    let ran = run_calls(
        mock,
        builder,
        Api::OpenAi,
        vec![
            ("a", "view_image", json!({"path": "a.png"})),
            ("b", "view_image", json!({"path": "b.png"})),
        ],
    );
    let a = ran.outcome("a");
    let b = ran.outcome("b");
    assert_eq!(size_of(&a.image("image/png")), (20, 10));
    assert_eq!(size_of(&b.image("image/png")), (10, 20));
    assert!(a.sent["content"].as_str().unwrap().contains("20x10 px"));

    let messages = a.request["messages"].as_array().unwrap();
    let at = messages
        .iter()
        .position(|m| m["role"] == "tool" && m["tool_call_id"] == "b")
        .unwrap();
    let follow = &messages[at + 1];
    assert_eq!(follow["role"], "user", "{follow}");
    let urls: Vec<&str> = follow["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["type"] == "image_url")
        .map(|p| p["image_url"]["url"].as_str().unwrap())
        .collect();
    assert_eq!(
        urls,
        [
            format!("data:image/png;base64,{}", a.image_data()),
            format!("data:image/png;base64,{}", b.image_data()),
        ]
    );
    let body = a.request.to_string();
    assert_eq!(body.matches("image_url").count(), 4, "two parts, no more");
}

#[test]
fn a_text_only_model_gets_a_note_instead_of_the_image() {
    for api in [Api::Ollama, Api::OpenAi] {
        let mock = MockLlm::start();
        let builder = nova_on(&mock, api, "text-model").file("pic.png", png(30, 30));
        let ran = run_calls(
            mock,
            builder,
            api,
            vec![("r", "read", json!({"path": "pic.png"}))],
        );
        let out = ran.outcome("r");
        out.image("image/png");
        let sent = out.sent["content"].as_str().unwrap();
        assert!(sent.starts_with("Read image file [image/png]"), "{sent}");
        assert!(
            sent.contains("[image omitted: model text-model does not accept images]"),
            "{api:?}: {sent}"
        );
        assert!(out.sent.get("images").is_none(), "{api:?}");
        let body = out.request.to_string();
        assert!(!body.contains(out.image_data()), "{api:?}: no base64 image");
        assert!(!body.contains("image_url"), "{api:?}");
        assert!(!body.contains("\"images\""), "{api:?}");
    }
}

#[test]
fn zoom_crops_magnifies_caps_and_rejects_outside_rectangles() {
    let mock = MockLlm::start();
    let builder = nova_on(&mock, Api::Ollama, "vision-model")
        .file("pic.png", png(300, 200))
        .file("wide.png", png(3000, 1000))
        .file("notes.txt", "not an image")
        .file("photo.jpg", {
            let mut out = Vec::new();
            gradient(120, 80)
                .write_to(&mut Cursor::new(&mut out), ImageFormat::Jpeg)
                .unwrap();
            out
        });
    let zoom = |x: i64, y: i64, w: i64, h: i64, scale: Option<i64>| {
        let mut args = json!({"path": "pic.png", "x": x, "y": y, "width": w, "height": h});
        if let Some(s) = scale {
            args["scale"] = json!(s);
        }
        args
    };
    let ran = run_calls(
        mock,
        builder,
        Api::Ollama,
        vec![
            ("default", "zoom", zoom(10, 20, 50, 40, None)),
            ("x4", "zoom", zoom(200, 150, 100, 50, Some(4))),
            ("capped", "zoom", zoom(0, 0, 300, 200, Some(8))),
            (
                "shrunk",
                "zoom",
                json!({"path": "wide.png", "x": 0, "y": 0, "width": 3000, "height": 1000, "scale": 1}),
            ),
            (
                "jpeg",
                "zoom",
                json!({"path": "photo.jpg", "x": 60, "y": 40, "width": 60, "height": 40, "scale": 3}),
            ),
            ("outside", "zoom", zoom(250, 150, 100, 100, None)),
            ("negative", "zoom", zoom(-5, 0, 10, 10, None)),
            ("empty", "zoom", zoom(0, 0, 0, 10, None)),
            ("scale", "zoom", zoom(0, 0, 10, 10, Some(9))),
            (
                "notimage",
                "zoom",
                json!({"path": "notes.txt", "x": 0, "y": 0, "width": 1, "height": 1}),
            ),
        ],
    );
    let out = ran.outcome("default");
    assert_eq!(size_of(&out.image("image/png")), (100, 80));
    assert!(
        out.text().starts_with(
            "Zoomed pic.png (PNG, 300x200 px): crop x=10 y=20 width=50 height=40, scale 2, \
             output 100x80 px PNG ("
        ),
        "{}",
        out.text()
    );
    assert_eq!(out.sent["images"], json!([out.image_data()]));

    // The crop is exact: scale 4 of a known gradient region.
    let x4 = ran.outcome("x4");
    let img = image::load_from_memory(&x4.image("image/png"))
        .unwrap()
        .to_rgb8();
    assert_eq!(img.dimensions(), (400, 200));
    let source = gradient(300, 200).to_rgb8();
    let centre = img.get_pixel(4 * 50 + 2, 4 * 25 + 2);
    let expected = source.get_pixel(250, 175);
    for c in 0..3 {
        assert!(
            centre[c].abs_diff(expected[c]) <= 8,
            "{centre:?} vs {expected:?}"
        );
    }

    let capped = ran.outcome("capped");
    assert_eq!(size_of(&capped.image("image/png")), (1800, 1200));
    assert!(
        capped.text().contains("so scale 6 was used"),
        "{}",
        capped.text()
    );

    let shrunk = ran.outcome("shrunk");
    let (w, h) = size_of(&shrunk.image("image/png"));
    assert_eq!(w, 2000);
    assert!(h == 666 || h == 667, "{w}x{h}");
    assert!(
        shrunk
            .text()
            .contains(&format!("so it was downscaled to {w}x{h} px")),
        "{}",
        shrunk.text()
    );

    let jpeg = ran.outcome("jpeg");
    assert_eq!(size_of(&jpeg.image("image/png")), (180, 120), "always PNG");
    assert!(
        jpeg.text()
            .starts_with("Zoomed photo.jpg (JPEG, 120x80 px): "),
        "{}",
        jpeg.text()
    );

    for id in ["outside", "negative", "empty"] {
        let text = ran.outcome(id).err().to_owned();
        assert!(text.contains("the image is 300x200 px"), "{id}: {text}");
    }
    assert_eq!(
        ran.outcome("outside").err(),
        "Rectangle x=250 y=150 width=100 height=100 is not inside the image: the image is \
         300x200 px (x 0-299, y 0-199)"
    );
    assert!(ran.outcome("scale").err().contains("scale"));
    assert!(
        ran.outcome("notimage").err().starts_with("Not a PNG"),
        "{}",
        ran.outcome("notimage").end
    );
}

#[test]
fn an_image_over_the_memory_budget_is_refused_with_its_size_and_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let huge = dir.path().join("huge.png");
    write_uniform_16_bit(&huge, 10_000, 10_000, ::png::ColorType::Rgb);
    let mock = MockLlm::start();
    let builder =
        nova_on(&mock, Api::Ollama, "vision-model").file("huge.png", std::fs::read(&huge).unwrap());
    let calls = ["view_image", "read"].map(|tool| (tool, tool, json!({"path": "huge.png"})));
    let ran = run_calls(mock, builder, Api::Ollama, calls.to_vec());
    for (id, ..) in calls {
        let e = ran.outcome(id).err().to_owned();
        assert!(e.contains("huge.png is 10000x10000 px, 16-bit RGB"), "{e}");
        assert!(e.contains("over nova's 768 MiB image memory budget"), "{e}");
    }
}
