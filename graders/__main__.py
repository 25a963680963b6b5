from graders.cli import main

raise SystemExit(main())
