"""Sign-in, sign-out and the language switch."""
