//! `castd gpus` without castd: prints the NVML report (driver version, one sample per GPU) as JSON, or
//! one line "no NVIDIA driver: ..." and exit 0. It touches no libav function, so it runs on a bare GPU
//! machine where castd's FFmpeg libraries are not installed (`cargo build -p hwaccel --example gpus`).

fn main() {
    match hwaccel::gpu::GpuMonitor::init().and_then(|m| m.report()) {
        Ok(report) => match serde_json::to_string_pretty(&report) {
            Ok(text) => println!("{text}"),
            Err(e) => {
                eprintln!("gpus: {e}");
                std::process::exit(1);
            }
        },
        Err(hwaccel::gpu::GpuError::NoDriver(e)) => println!("no NVIDIA driver: {e}"),
        Err(e) => {
            eprintln!("gpus: {e}");
            std::process::exit(1);
        }
    }
}
