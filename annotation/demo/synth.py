"""The demo benchmark's audio clips.

Tones are synthesized here (deterministic, 16 kHz mono 16-bit WAV). The three speech clips in ``audio/`` were
spoken by espeak-ng (voices en-gb+f3, en-gb-scotland, en-us+m3 and en-gb+f4) and are committed as small FLAC
files, so the demo needs no speech synthesizer. Each clip has content a listener can verify, so the questions
about them have one right answer.
"""
import shutil
from pathlib import Path

import numpy as np

SAMPLE_RATE = 16_000


def _tone(freq_hz: float, seconds: float, amplitude: float = 0.3) -> np.ndarray:
    t = np.arange(int(SAMPLE_RATE * seconds)) / SAMPLE_RATE
    fade = np.minimum(1.0, np.minimum(t, seconds - t) / 0.01)  # 10 ms ramps avoid clicks
    return amplitude * np.sin(2 * np.pi * freq_hz * t) * fade


def _silence(seconds: float) -> np.ndarray:
    return np.zeros(int(SAMPLE_RATE * seconds))


def three_beeps() -> np.ndarray:
    """Three 880 Hz beeps of 0.25 s, 0.35 s apart: 1.95 s."""
    beep = _tone(880.0, 0.25)
    gap = _silence(0.35)
    return np.concatenate([gap, beep, gap, beep, gap, beep, gap])


def c_major_chord() -> np.ndarray:
    """C major triad (C4 261.63 Hz, E4 329.63 Hz, G4 392.00 Hz) for 2.5 s."""
    return sum(_tone(f, 2.5, 0.2) for f in (261.63, 329.63, 392.00))


def rising_sweep() -> np.ndarray:
    """A sine sweep rising from 200 Hz to 800 Hz over 3 s (exponential)."""
    seconds = 3.0
    t = np.arange(int(SAMPLE_RATE * seconds)) / SAMPLE_RATE
    k = np.log(800.0 / 200.0) / seconds
    phase = 2 * np.pi * 200.0 * (np.exp(k * t) - 1) / k
    return 0.3 * np.sin(phase)


def tone_wav_write(path: Path, *, freq_hz: float = 440.0, seconds: float = 1.0) -> Path:
    """Write a sine of ``freq_hz`` Hz lasting ``seconds`` s to ``path`` as a 16 kHz mono 16-bit WAV (the demo's
    tones; the clip an LALM's connection test is asked about) and return ``path``."""
    import soundfile as sf

    sf.write(path, _tone(freq_hz, seconds).astype(np.float32), SAMPLE_RATE, subtype="PCM_16")
    return path


#: File name (the demo question id + ".wav") -> generator.
CLIPS = {
    "demo-beeps.wav": three_beeps,
    "demo-chord.wav": c_major_chord,
    "demo-sweep.wav": rising_sweep,
}


#: The committed speech clips (``<question id>.flac``).
SPEECH_DIR = Path(__file__).resolve().parent / "audio"


def write_demo_clips(out_dir: Path) -> list[Path]:
    """Write every demo clip (synthesized tones and the committed speech clips) into ``out_dir``.

    ``out_dir`` is created if needed. Files are written only when absent, so repeated calls are cheap and the
    bytes (and sha256) never change. Returns the paths of all clips.
    """
    import soundfile as sf

    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, make in CLIPS.items():
        path = out_dir / name
        if not path.exists():
            sf.write(path, make().astype(np.float32), SAMPLE_RATE, subtype="PCM_16")
        paths.append(path)
    for speech in sorted(SPEECH_DIR.glob("*.flac")):
        path = out_dir / speech.name
        if not path.exists():
            shutil.copyfile(speech, path)
        paths.append(path)
    return paths
