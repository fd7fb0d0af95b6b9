//! The vision front end's canonicalisation: a `Conv` whose kernel equals its stride (a ViT's or
//! SigLIP's patch embedding) is a matmul over patches. The image `[N, C, H, W]` is reshaped to
//! `[N, C, h, p, w, q]`, transposed to `[N, h, w, C, p, q]` and reshaped to rows of patches
//! `[N, h·w, C·p·q]`; the kernel `[D, C, p, q]` becomes the constant `[C·p·q, D]`; the product plus the
//! bias is reshaped and transposed back to the Conv's `[N, D, h, w]`, which the model's own
//! Reshape/Transpose to `[N, h·w, D]` then undoes (`movement_chains`).
//!
//! A Conv with padding, dilation, groups, or a kernel other than its stride is left alone, and the
//! lowering refuses it by name.

use super::OnnxError;
use super::opgraph::{Elem, Info, OpGraph};
use super::tensor::{Attrs, Data, Tensor};

/// `Conv` with kernel = stride → patches, MatMul and Add.
pub fn conv_patches(g: &mut OpGraph) -> Result<usize, OnnxError> {
    let mut count = 0;
    let mut at = 0;
    while at < g.nodes.len() {
        at += 1;
        let node = g.nodes[at - 1].clone();
        if node.op != "Conv" {
            continue;
        }
        let (Some(x), Some(w)) = (node.input(0), node.input(1)) else {
            continue;
        };
        let (Some(xs), Some(kernel)) = (
            g.infos.get(x).map(|i| i.shape.clone()),
            g.consts.get(w).cloned(),
        ) else {
            continue;
        };
        let &[n, c, hh, ww] = xs.as_slice() else {
            continue;
        };
        let &[d, kc, p, q] = kernel.shape.as_slice() else {
            continue;
        };
        let a = &node.attrs;
        let strides = a.ints("strides").unwrap_or(vec![1, 1]);
        let plain = kc == c
            && strides == [p as i64, q as i64]
            && a.ints("kernel_shape")
                .is_none_or(|k| k == [p as i64, q as i64])
            && a.ints("pads").is_none_or(|v| v.iter().all(|&x| x == 0))
            && a.ints("dilations")
                .is_none_or(|v| v.iter().all(|&x| x == 1))
            && a.i("group").unwrap_or(1) == 1
            && a.s("auto_pad")
                .is_none_or(|s| s == "NOTSET" || s == "VALID")
            && hh % p == 0
            && ww % q == 0;
        if !plain {
            continue;
        }
        let (h, wq) = (hh / p, ww / q);
        let bias = match node.input(2) {
            Some(b) => match g.consts.get(b) {
                Some(t) if t.len() == d => Some(b.to_string()),
                _ => continue,
            },
            None => None,
        };
        let float = |shape: Vec<usize>| Info {
            shape,
            elem: Elem::Float,
        };
        let dims = |g: &mut OpGraph, s: &[usize]| {
            g.constant(
                &node.name,
                Tensor {
                    shape: vec![s.len()],
                    data: Data::I64(s.iter().map(|&v| v as i64).collect()),
                },
            )
        };
        let s1 = dims(g, &[n, c, h, p, wq, q]);
        let r1 = g.step(
            &node.name,
            "Reshape",
            vec![x.to_string(), s1],
            Attrs::default(),
            float(vec![n, c, h, p, wq, q]),
        );
        let t1 = g.step(
            &node.name,
            "Transpose",
            vec![r1.output().to_string()],
            Attrs::default().with_ints("perm", vec![0, 2, 4, 1, 3, 5]),
            float(vec![n, h, wq, c, p, q]),
        );
        let s2 = dims(g, &[n, h * wq, c * p * q]);
        let r2 = g.step(
            &node.name,
            "Reshape",
            vec![t1.output().to_string(), s2],
            Attrs::default(),
            float(vec![n, h * wq, c * p * q]),
        );
        // The kernel [D, C·p·q] transposed: [C·p·q, D].
        let k = kernel.floats();
        let cpq = c * p * q;
        let wm: Vec<f32> = (0..cpq)
            .flat_map(|i| (0..d).map(move |o| (i, o)))
            .map(|(i, o)| k[o * cpq + i])
            .collect();
        let wm = g.constant(
            w,
            Tensor {
                shape: vec![cpq, d],
                data: Data::F32(wm),
            },
        );
        let mm = g.step(
            &node.name,
            "MatMul",
            vec![r2.output().to_string(), wm],
            Attrs::default(),
            float(vec![n, h * wq, d]),
        );
        let mut steps = vec![r1, t1, r2, mm];
        if let Some(b) = bias {
            let last = steps.last().expect("the matmul").output().to_string();
            steps.push(g.step(
                &node.name,
                "Add",
                vec![last, b],
                Attrs::default(),
                float(vec![n, h * wq, d]),
            ));
        }
        let s3 = dims(g, &[n, h, wq, d]);
        let last = steps.last().expect("the matmul").output().to_string();
        let r3 = g.step(
            &node.name,
            "Reshape",
            vec![last, s3],
            Attrs::default(),
            float(vec![n, h, wq, d]),
        );
        let t3 = g.step(
            &node.name,
            "Transpose",
            vec![r3.output().to_string()],
            Attrs::default().with_ints("perm", vec![0, 3, 1, 2]),
            float(vec![n, d, h, wq]),
        );
        steps.extend([r3, t3]);
        g.replace(at - 1, steps);
        count += 1;
    }
    Ok(count)
}
