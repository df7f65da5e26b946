"""Class-conditional image generation on the UCI 8x8 digits: data, model, classifier, metrics,
bench."""
